"""`rlvr-paper` on fixture datasets with the real datasets' columns (tests/paper_fixtures.py):
its dry run passes (default tier) and one training step runs on CPU with tiny-random
through the real CLI (slow tier)."""

from __future__ import annotations

import json

import pytest
from paper_fixtures import write_paper_data
from roll_in_process import cli

from rollcli.rewards.sandbox import detect_isolation


def test_rlvr_paper_dry_run_reads_every_domain_and_says_the_judge_is_off(tmp_path, tiny_model):
    overrides = write_paper_data(tmp_path)
    code, err = cli("train", "rlvr-paper", "--model", "tiny-random", "--dry-run", *overrides)
    assert code == 0, err[-3000:]
    flat = " ".join(err.split())
    assert "domain llm_judge: scored by rule (final-answer match); no judge endpoint" in flat
    assert "not in the Hugging Face cache" not in flat  # every domain read from its fixture


def test_a_sample_larger_than_its_fixture_is_refused_in_the_dry_run(tmp_path, tiny_model):
    overrides = [*write_paper_data(tmp_path), "data.mix.math_rule.sample.n=5000"]
    code, err = cli("train", "rlvr-paper", "--model", "tiny-random", "--dry-run", *overrides)
    flat = " ".join(err.split())
    assert code != 0 and "data.mix.math_rule.sample.n = 5,000 but" in flat
    assert "has 12 rows" in flat


@pytest.mark.slow
@pytest.mark.skipif(
    not detect_isolation()["strong"], reason="the code sandbox needs network+mount namespaces"
)
@pytest.mark.parametrize(
    "model",
    [["tiny-random"], ["tiny-random-moe", "algorithm.router_replay=R3"]],  # the 30B-A3B row's
    ids=["dense", "moe"],
)
def test_rlvr_paper_trains_one_step_on_the_fixtures(tmp_path, tiny_model, ray_session, model):
    code, err = cli(
        "train", "rlvr-paper", "--model", model[0], "--steps", "1", "--runs-dir",
        str(tmp_path), "--run-id", "paper", *write_paper_data(tmp_path), *model[1:],
        "rollout.batch_size=4", "rollout.group_size=2", "rollout.max_new_tokens=8",
        "train.micro_batch_size=2", "train.warmup_steps=0", "run.eval_every=0",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    run = tmp_path / "paper"
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1]["step"] == 1 and steps[-1]["reward/errors"] == 0.0
    rows = [json.loads(x) for x in (run / "samples" / "step-1.jsonl").read_text().splitlines()]
    assert len(rows) == 4
    assert {r["tag"] for r in rows} <= {
        "math_rule",
        "code_sandbox",
        "llm_judge",
        "crossthinkqa",
        "ifeval",
    }

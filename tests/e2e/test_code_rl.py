"""`roll train rlvr-code` and `rlvr-mix` on tiny-random through the real CLI, Ray, workers
and sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roll_subprocess import roll

from rollcli.rewards.sandbox import detect_isolation

pytestmark = pytest.mark.skipif(
    not detect_isolation()["strong"], reason="the code sandbox needs network+mount namespaces"
)
SMALL = ["rollout.batch_size=8", "rollout.max_new_tokens=16", "train.micro_batch_size=4"]


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


# ~30 s: the rlvr pipeline's default-tier CLI run is tests/e2e/test_rlvr_cli.py's; the sandbox
# scores real programs by default in tests/sandbox (test_code_reward.py, test_hostile.py)
@pytest.mark.slow
def test_rlvr_code_trains_two_steps_scoring_programs_in_the_sandbox(tmp_path, tiny_model):
    result = roll(
        "train", "rlvr-code", "--model", "tiny-random", "--steps", "2", "--runs-dir",
        str(tmp_path), "--run-id", "code", "data.val_size=4", *SMALL, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "code"
    steps = _metrics(run)
    assert [m["step"] for m in steps] == [0, 1, 2]
    last = steps[-1]
    # every program ran in the sandbox and got a verdict: the failure kinds add up to 1
    fails = sum(v for k, v in last.items() if k.startswith("reward/fail/"))
    assert last["reward/total"] == 1.0 and fails + last["reward/correct"] == pytest.approx(1.0)
    assert last["reward/errors"] == 0.0
    rows = [json.loads(x) for x in (run / "samples" / "step-2.jsonl").read_text().splitlines()]
    assert len(rows) == 8 and all(r["reason"] in ("ok", "syntax_error", "runtime_error",
                                                  "assertion", "timeout") for r in rows)  # fmt: skip
    assert all("entry_point" in json.loads(r["answer"]) for r in rows)
    assert "val/accuracy" in last


@pytest.mark.slow
def test_rlvr_mix_logs_a_mean_reward_per_domain(tmp_path, tiny_model):
    result = roll(
        "train", "rlvr-mix", "--model", "tiny-random", "--steps", "2", "--runs-dir",
        str(tmp_path), "--run-id", "mix", "data.val_size=6", "data.train_size=60",
        "rollout.batch_size=24", "rollout.group_size=4", "rollout.max_new_tokens=16",
        "train.micro_batch_size=8", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "mix"
    rows = [json.loads(x) for x in (run / "samples" / "step-1.jsonl").read_text().splitlines()]
    tags = {r["tag"] for r in rows}
    step = _metrics(run)[1]
    for tag in tags:  # each domain drawn this step has its own mean, equal to its rows' mean
        scores = [r["reward"] for r in rows if r["tag"] == tag]
        assert step[f"reward/{tag}/mean"] == pytest.approx(sum(scores) / len(scores))
    assert tags <= {"math", "code", "general"} and len(tags) >= 2
    assert step["reward/errors"] == 0.0

"""Partial rollouts through the CLI and real Ray (`rollout.partial`): a step trains on the
groups that have ended and the unfinished samples continue under newer weights. Two runs
with one seed are bitwise equal, and a run SIGKILLed while paused samples exist resumes to
the weights the uninterrupted run reached, bitwise.

The model is tiny-random with 1,000 token ids named EOS in its generation config, so
replies end after a few dozen tokens, at different decode steps (tiny-random's own EOS
almost never comes: every reply would run to the limit and none would be paused).
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
from roll_in_process import cli
from roll_subprocess import roll

from rollcli.runs.checkpoint import load_tensors_file

STEPS = 4
GROUP = 4


def _args(model: Path) -> list[str]:
    return [
        "--model",
        str(model),
        "--steps",
        str(STEPS),
        "--save-every",
        "1",
        "--eval-every",
        "0",
        "data.train_size=80",
        "data.val_size=2",
        f"rollout.group_size={GROUP}",
        "rollout.batch_size=8",  # 2 groups per step, 4 in flight
        "rollout.max_new_tokens=64",
        "rollout.max_staleness=2",  # one step ahead; a sample continues once
        "rollout.partial=true",
        "algorithm.dynamic_sampling=true",  # groups that agree are dropped, others paused
        "algorithm.off_policy.correction=tis",
        "reward.fn=coin_rewards:coin",
        "train.lr=1e-3",
        "train.micro_batch_size=4",
        "run.keep_last=5",
    ]


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


@pytest.fixture(scope="module")
def eos_model(tmp_path_factory, tiny_model) -> Path:
    folder = tmp_path_factory.mktemp("models") / "tiny-eos"
    shutil.copytree(tiny_model, folder)
    config = folder / "generation_config.json"
    gen = json.loads(config.read_text())
    gen["eos_token_id"] = list(range(1000, 2000))
    config.write_text(json.dumps(gen))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


def _train(runs: Path, run_id: str, model: Path) -> Path:
    code, err = cli("train", "rlvr", "--runs-dir", str(runs), "--run-id", run_id, *_args(model))
    assert code == 0, err[-3000:]
    return runs / run_id


@pytest.fixture(scope="module")
def reference(runs, eos_model) -> Path:
    return _train(runs, "ref", eos_model)


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _samples(run: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run / "samples" / f"step-{step}.jsonl").open()]


def _weights(run: Path, step: int = STEPS) -> bytes:
    return (run / "checkpoints" / f"step-{step}" / "model.safetensors").read_bytes()


def test_continued_samples_train_with_their_versions(reference) -> None:
    rows = _rows(reference)[1:]
    assert sum(r["rollout/dropped_groups"] for r in rows) > 0  # dynamic sampling dropped some
    assert sum(r["rollout/partial_continued"] for r in rows) > 0
    assert max(r["rollout/token_staleness/max"] for r in rows) <= 2
    versions = []
    for step, row in enumerate(rows, start=1):
        samples = _samples(reference, step)
        assert len(samples) == 8
        assert sum(s["continued"] for s in samples) == row["rollout/partial_continued"]
        for s in samples:  # the oldest token bounds the staleness: step - 1 is trained
            assert (step - 1) - s["policy_version"] <= 2
        versions += [len(s["policy_versions"]) for s in samples]
    assert max(versions) == 2  # some sample's tokens come from two policies
    assert 0 < rows[0]["rollout/rows_busy"] <= 1


def test_a_killed_run_with_paused_samples_resumes_bitwise(reference, runs, eos_model) -> None:
    """SIGKILL as step 4 starts training. Up to there the run is a second uninterrupted
    run with the reference's seed: its samples and step-3 weights are the reference's, bit
    for bit. Checkpoint step-3 holds the paused samples, and `roll resume` ends with the
    reference's weights, bit for bit."""
    args = ["train", "rlvr", "--runs-dir", str(runs), "--run-id", "killed", *_args(eos_model)]
    result = roll(*args, cwd=runs, fault="kill@train:4", pythonpath=Path(__file__).parent)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    killed = runs / "killed"
    assert _weights(killed, STEPS - 1) == _weights(reference, STEPS - 1)
    for step in range(1, STEPS):
        assert _samples(killed, step) == _samples(reference, step)
    pool = load_tensors_file(runs / "killed" / "checkpoints" / "step-3" / "partial_pool.pt")
    paused = [s for g in pool for s in g["samples"] if s["token_ids"] and not s["ended"]]
    assert paused, "the checkpoint holds no paused sample"
    assert all(len(s["versions"]) == len(s["token_ids"]) for s in paused)
    code, err = cli("resume", "killed", "--runs-dir", str(runs))
    assert code == 0, err[-3000:]
    assert "resuming from checkpoint step-3" in (runs / "killed" / "events.log").read_text()
    assert _samples(runs / "killed", STEPS) == _samples(reference, STEPS)
    assert _weights(runs / "killed") == _weights(reference)

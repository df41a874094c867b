"""The rollout scheduler through the CLI app and real Ray (tiny-random): async rollout one
step ahead (`rollout.max_staleness=1`) with truncated importance sampling, and dynamic
sampling with over-sampling and aborts. A run resumed from a mid-way checkpoint repeats the
uninterrupted one (its samples exactly; metrics and weights up to float32 rounding),
including the rollout that was running ahead (the SIGKILL itself is
tests/e2e/test_offline_pipelines.py's, through the same driver loop). Both runs are the CLI
app in this process, on the suite's Ray session (tests/roll_in_process.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from roll_in_process import cli
from same_run import assert_same_run

GROUP = 4
ARGS = [
    "--model",
    "tiny-random",
    "--steps",
    "3",
    "--save-every",
    "1",
    "--eval-every",
    "0",
    "data.train_size=40",
    "data.val_size=2",
    f"rollout.group_size={GROUP}",
    "rollout.batch_size=8",  # 2 groups per step
    "rollout.max_new_tokens=8",
    "rollout.request_groups=1",
    "rollout.max_staleness=1",
    "rollout.oversample=3",
    "algorithm.dynamic_sampling=true",
    "algorithm.off_policy.correction=tis",
    "reward.fn=coin_rewards:coin",
    "train.lr=1e-3",
    "train.micro_batch_size=4",
    "run.keep_last=5",  # keep step-1: the resume test starts from it
]


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def _samples(run: Path, step: int) -> list[dict]:
    return [json.loads(line) for line in (run / "samples" / f"step-{step}.jsonl").open()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def reference(runs) -> Path:
    """The uninterrupted run, in this process (the suite's Ray session)."""
    code, err = cli("train", "rlvr", "--runs-dir", str(runs), "--run-id", "ref", *ARGS)
    assert code == 0, err[-3000:]
    return runs / "ref"


def test_async_dynamic_rollout_keeps_only_groups_that_differ(reference) -> None:
    rows = _rows(reference)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    # step 1's rollout runs with the starting weights; later ones one update behind
    assert [r["rollout/staleness"] for r in rows[1:]] == [0, 1, 1]
    for step, row in enumerate(rows[1:], start=1):
        samples = _samples(reference, step)
        assert len(samples) == 8
        groups = [samples[i : i + GROUP] for i in range(0, len(samples), GROUP)]
        for group in groups:  # every kept group has rewards that differ
            assert len({s["prompt"] for s in group}) == 1
            assert len({s["reward"] for s in group}) == 2
        versions = {s["policy_version"] for s in samples}
        assert versions == {max(step - 2, 0)} if step > 1 else versions == {0}
        # over-sampled 3x: 6 groups drawn in 6 requests; those past the 2 kept ones and
        # the dropped ones were never needed and are aborted
        assert row["rollout/dropped_groups"] + 2 + row["rollout/aborted"] <= 6 * (
            1 + row["rollout/sample_rounds"]
        )
        assert 0.5 < row["rollout/mismatch_ratio_mean"] < 2.0
    assert sum(r["rollout/aborted"] for r in rows[1:]) > 0
    assert (reference / "checkpoints" / "step-2" / "rollouts_ahead.pt").exists()


def test_async_run_resumed_from_a_checkpoint_repeats_the_run(reference, runs) -> None:
    """A copy of the finished run cut back to its step-1 checkpoint (the state a SIGKILL
    during step 2 leaves: step 2's rollout, played ahead, saved with it) and resumed through
    the CLI ends as the run did: metrics, samples and weights."""
    cut = runs / "cut"
    shutil.copytree(reference, cut)
    for step in (2, 3):  # what the resumed run must make again
        shutil.rmtree(cut / "checkpoints" / f"step-{step}")
        (cut / "samples" / f"step-{step}.jsonl").unlink()
    assert (cut / "checkpoints" / "step-1" / "rollouts_ahead.pt").exists()
    code, err = cli("resume", "cut", "--runs-dir", str(runs))
    assert code == 0, err[-3000:]
    assert "resuming from checkpoint step-1" in (cut / "events.log").read_text()
    for step in (1, 2, 3):
        got = [(s["response"], s["reward"]) for s in _samples(cut, step)]
        assert got == [(s["response"], s["reward"]) for s in _samples(reference, step)]
    assert_same_run(cut, reference, 3)

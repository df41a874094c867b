"""SIGTERM to a run's whole process group, as `timeout`, Slurm and Kubernetes send it: the
workers and Ray's daemons outlive it, the step finishes, a complete checkpoint is written,
the status says stopped (SIGTERM), the command exits 143 naming `roll resume`, with no
traceback or Ray/C++ stack on stderr; `roll resume` then ends with the weights of the run
that was never stopped. The signalled run is a subprocess (a process group of its own); the
resume and the reference run are the CLI app in this process (tests/roll_in_process.py)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from roll_in_process import cli
from roll_subprocess import roll
from same_run import assert_same_run

pytestmark = pytest.mark.usefixtures("ray_session")
STEPS = 3
ARGS = [
    "--model", "tiny-random", "--steps", str(STEPS), "--save-every", "1",
    "--eval-every", "0", "rollout.batch_size=8", "rollout.group_size=4",
    "rollout.max_new_tokens=8", "data.val_size=4", "data.train_size=8",
    "train.micro_batch_size=4", "algorithm.entropy_coef=0.01",
]  # fmt: skip


def _logged(run: Path) -> set[int]:
    path = run / "metrics.jsonl"
    return (
        {json.loads(x)["step"] for x in path.read_text().splitlines()} if path.exists() else set()
    )


def test_sigterm_to_the_job_stops_with_a_checkpoint_and_resume_ends_the_same(tmp_path):
    run = tmp_path / "term"
    args = ["train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "term", *ARGS]
    done = roll(
        *args, cwd=tmp_path, ctrl_c_when=lambda: 1 in _logged(run), stop_signal=signal.SIGTERM
    )
    assert done.returncode == 143, done.stderr[-2000:]
    for noise in ("Traceback", "SIGTERM received", "logging.cc", "PC: @"):
        assert noise not in done.stderr, done.stderr[-2000:]
    assert f"continue with: roll resume term --runs-dir {tmp_path}" in " ".join(done.stderr.split())
    status = json.loads((run / "status.json").read_text())
    assert (status["status"], status["stop_reason"]) == ("stopped", "SIGTERM")
    stopped_at = max(_logged(run))
    assert 1 <= stopped_at < STEPS
    assert (run / "checkpoints" / f"step-{stopped_at}" / "COMPLETE").exists()
    events = (run / "events.log").read_text()
    assert "stop requested (SIGTERM) during step" in events
    assert f"stopped (SIGTERM) at step {stopped_at} of {STEPS}, after a checkpoint" in events
    assert f"stopped at step {stopped_at} of {STEPS}" in " ".join(done.stdout.split())

    code, err = cli("resume", "term", "--runs-dir", str(tmp_path))
    assert code == 0, err[-3000:]
    code, err = cli("train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "ref", *ARGS)
    assert code == 0, err[-3000:]
    assert_same_run(run, tmp_path / "ref", STEPS)

"""A real run (`roll train sft --model tiny-random` through the CLI app, Ray and workers) on a
disk that fills up: `shutil.disk_usage` reports its true figures until the run has two
checkpoints, then 1,000 bytes free (a disk cannot be filled for real here). The run warns
after step 2's checkpoint that the next will not fit, stops before writing step 3's with one
line (status `failed`, saying why, no partial folder), and with `run.keep_optimizer: last`
its step-1 checkpoint has no optimizer state: `roll eval --model RUN` reads it, `roll resume`
refuses it in one line once the newer checkpoint is gone."""

from __future__ import annotations

import json
import shutil
from collections import namedtuple

import pytest
from error_text import error_message
from roll_in_process import cli

from rollcli.runs.checkpoint import complete_checkpoints, remove_checkpoint
from rollcli.runs.optimizer_states import resumable
from rollcli.runs.run_dir import RunDir

pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)
Usage = namedtuple("Usage", "total used free")
TRAIN = [
    "--model",
    "tiny-random",
    "--steps",
    "3",
    "--save-every",
    "1",
    "--eval-every",
    "0",
    "run.keep_last=5",
    "run.keep_optimizer=last",
    "data.train_size=24",
    "data.val_size=4",
    "sft.batch_size=4",
    "sft.max_tokens=128",
    "rollout.max_new_tokens=4",
    "train.micro_batch_size=2",
]


def test_a_run_that_would_fill_the_disk_warns_then_stops_before_writing(
    tmp_path, monkeypatch
) -> None:
    runs = tmp_path / "runs"
    checkpoints = runs / "full" / "checkpoints"
    real = shutil.disk_usage

    def disk_usage(path):  # noqa: ANN001, ANN202
        total, used, free = real(path)
        return Usage(total, used, 1000 if len(complete_checkpoints(checkpoints)) >= 2 else free)

    monkeypatch.setattr(shutil, "disk_usage", disk_usage)
    code, err = cli("train", "sft", "--runs-dir", str(runs), "--run-id", "full", *TRAIN)
    monkeypatch.undo()

    assert code == 2, err
    error = error_message(err[err.index("error: ") :])
    assert error.startswith(f"error: no room for checkpoint step-3: 0.0 MB free on {checkpoints}")
    assert error.endswith("nothing was written; free space (roll runs gc, roll runs rm) and resume")
    assert "Traceback" not in err
    run = RunDir(runs / "full")
    status = run.read_status()
    assert status["status"] == "failed"
    assert status["error"].startswith("DiskFullError: no room for checkpoint step-3")
    events = (runs / "full" / "events.log").read_text().splitlines()
    written = [i for i, e in enumerate(events) if "checkpoint written:" in e]
    warned = [i for i, e in enumerate(events) if "warning: disk nearly full: 0.0 MB free on " in e]
    dropped = [i for i, e in enumerate(events) if "optimizer states of the older" in e]
    assert len(written) == 2 and dropped == [written[1] + 1]  # step 1's, once step 2 is in
    assert warned == [written[1] + 2]  # right after step 2's checkpoint
    assert "failed: DiskFullError: no room for checkpoint step-3" in events[-1]
    assert sorted(p.name for p in checkpoints.iterdir()) == ["step-1", "step-2"]  # no .tmp
    step1, step2 = checkpoints / "step-1", checkpoints / "step-2"
    assert not resumable(step1) and not (step1 / "actor_optim.pt").exists()
    assert resumable(step2) and (step2 / "actor_optim.pt").exists()

    # the newer checkpoint deleted by hand: step-1 is the newest, evaluable, not resumable
    remove_checkpoint(step2)
    code, err = cli(
        "eval", "rlvr-math", "--model", "full", "--runs-dir", str(runs), "--n", "2",
        "rollout.max_new_tokens=4", "--json",
    )  # fmt: skip
    assert code == 0, err
    code, err = cli("resume", "full", "--runs-dir", str(runs))
    assert code == 2
    message = error_message(err)  # one message
    assert "checkpoint step-1 has no optimizer state (run.keep_optimizer: last" in message
    assert "--model full" in message
    assert json.loads((runs / "full" / "status.json").read_text())["status"] == "failed"

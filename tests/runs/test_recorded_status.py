"""`launch.recorded`: what status.json and events.log say when a run (or its warm-up) is
interrupted or fails, read back from the files."""

from __future__ import annotations

import threading
import time

import pytest

from rollcli.launch.launch import recorded
from rollcli.runs.run_dir import RunDir


def _run(tmp_path) -> RunDir:
    run = RunDir.create(tmp_path, "r", "name: r\n")
    run.write_status("running")
    return run


def _events(run: RunDir) -> str:
    return (run.root / "events.log").read_text()


def test_a_failure_is_the_status_with_its_error_and_an_event(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(ValueError), recorded(run):
        raise ValueError("bad reward")
    status = run.read_status()
    assert status["status"] == "failed" and status["error"] == "ValueError: bad reward"
    assert "failed: ValueError: bad reward" in _events(run)


def test_a_failed_warm_up_names_the_stage(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(RuntimeError), recorded(run, "the warm-up", "`roll resume` finishes it"):
        raise RuntimeError("no checkpoint")
    assert run.read_status()["error"] == "warm-up: RuntimeError: no checkpoint"
    assert "failed in the warm-up: RuntimeError: no checkpoint" in _events(run)


@pytest.mark.parametrize(
    ("stage", "line"),
    [
        ("", "interrupted by the user"),
        ("the warm-up", "interrupted during the warm-up; `roll resume` finishes it"),
    ],
)
def test_ctrl_c_is_interrupted(tmp_path, stage, line):
    run = _run(tmp_path)
    with pytest.raises(KeyboardInterrupt), recorded(run, stage, "`roll resume` finishes it"):
        raise KeyboardInterrupt
    assert run.read_status()["status"] == "interrupted"
    assert line in _events(run)


def test_the_heartbeat_runs_inside_the_block_and_stops_after_it(tmp_path):
    run = _run(tmp_path)

    def beating() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "roll-heartbeat" and t.is_alive()}

    before = beating()  # an earlier test's heartbeat may still be winding down
    with recorded(run):
        ours = beating() - before
        assert len(ours) == 1
    deadline = time.monotonic() + 5
    while ours & beating() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not ours & beating()
    assert run.read_status()["status"] == "running"  # a block that ends well changes nothing

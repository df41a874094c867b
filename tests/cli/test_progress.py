"""Progress where stderr is a file or a pipe (issue 65, item 5): plain lines at each tenth and
at least every 30 s, never silence for minutes (`roll eval ... 2>log` printed nothing for
69 minutes). The rules against a hand-driven clock, then `roll eval` and `roll train`
through the real CLI with stderr in a file, read while they run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rollcli.cli.progress import ProgressLines


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _lines(**kwargs: object) -> tuple[ProgressLines, list[str], Clock]:
    written: list[str] = []
    clock = Clock()
    return ProgressLines(written.append, clock=clock, heartbeat=False, **kwargs), written, clock


def test_a_line_at_each_tenth_and_after_30_s_without_one() -> None:
    lines, written, clock = _lines()
    lines.update("episodes", 0, 200)
    clock.now = 8.0
    lines.update("episodes", 19, 200)
    assert written == []  # under a tenth, under 30 s
    clock.now = 10.0
    lines.update("episodes", 20, 200)  # 20 in 10 s: 2/s, 180 left: 90 s
    assert written == ["  episodes 20/200 (10%), 2.0/s, eta 1m30s"]
    clock.now = 12.0
    lines.update("episodes", 25, 200)
    clock.now = 40.0
    lines.update("episodes", 30, 200)  # 15%, but 30 s since the last line
    # 30 in 40 s: 0.75/s, under one a second: 1.3 s each; 170 left: 226.7 s
    assert written[1:] == ["  episodes 30/200 (15%), 1.3 s each, eta 3m47s"]
    clock.now = 60.0
    lines.beat()  # 20 s: nothing yet
    clock.now = 70.0
    lines.beat()  # nothing reported for 30 s: the state now, its rate fallen to 30 in 70 s
    assert written[2:] == ["  episodes 30/200 (15%), 2.3 s each, eta 6m37s"]  # 170 * 70 / 30
    clock.now = 75.0
    lines.update("episodes", 200, 200)
    assert written[3:] == ["  episodes 200/200 (100%), 2.7/s"]  # done: no eta


def test_a_phase_without_a_count_says_how_long_it_has_run() -> None:
    lines, written, clock = _lines()
    lines.update("step", 3, 40)  # a resumed run: the rate counts from here, no line yet
    clock.now = 5.0
    lines.update("step 4/40: training", 0, 0, tenths=False)
    clock.now = 29.0
    lines.beat()
    clock.now = 31.0
    lines.beat()
    assert written == ["  step 4/40: training, 26s so far"]
    clock.now = 100.0
    lines.update("step", 4, 40, notes=["reward 0.125", "x" * 40, "length 41.0"])
    # 1 step in 100 s; a note that would pass 80 columns is left out, and those after it
    assert written[1:] == ["  step 4/40 (10%), 100.0 s each, eta 1h00m · reward 0.125"]


def test_the_heartbeat_writes_while_nothing_is_reported() -> None:
    written: list[str] = []
    lines = ProgressLines(written.append, every_s=0.05)
    try:
        lines.update("step 1/2: training", 0, 0, tenths=False)
        deadline = time.monotonic() + 10
        while len(written) < 2:
            assert time.monotonic() < deadline, "no heartbeat line"
            time.sleep(0.01)
    finally:
        lines.close()
    assert all(w.startswith("  step 1/2: training, ") for w in written)


def _progress_while_running(args: list[str], pattern: str, log: Path, cwd: Path) -> str:
    """Run `roll ARGS` with stderr in `log`; return the log once a line matching `pattern`
    is in it, checking that the command was still running then; then wait for it to end."""
    env = {**os.environ, "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
    with log.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rollcli", *args],
            cwd=cwd,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 600
        while not re.search(pattern, log.read_text(), re.MULTILINE):
            assert proc.poll() is None, f"ended before a progress line:\n{log.read_text()}"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        seen = log.read_text()
        assert proc.wait(timeout=600) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return seen


def test_roll_eval_writes_progress_lines_to_a_file_while_it_runs(tiny_model, tmp_path) -> None:
    # enough tokens to outlast the half-second polls of the engine on a fast CPU
    args = ["eval", "rlvr-math", "--model", "tiny-random", "--n", "32"]
    args += ["rollout.max_new_tokens=256"]
    seen = _progress_while_running(
        args, r"^  greedy: tokens \d+/8192 \(\d+%\), [\d.]+/s", tmp_path / "log", tmp_path
    )
    assert "━" not in seen  # no bar drawn into the file


@pytest.mark.slow  # ~31 s: a real two-step rlvr run (the eval case above covers the file)
def test_roll_train_writes_progress_lines_to_a_file_while_it_runs(tiny_model, tmp_path) -> None:
    args = ["train", "rlvr", "--model", "tiny-random", "--steps", "2", "--runs-dir", "runs"]
    args += ["rollout.batch_size=4", "rollout.group_size=2", "rollout.max_new_tokens=8"]
    args += ["data.val_size=2", "data.train_size=20", "train.micro_batch_size=4"]
    log = tmp_path / "log"
    _progress_while_running(args, r"^  step 1/2 \(50%\), [\d.]+ s each, eta ", log, tmp_path)
    text = log.read_text()
    assert re.search(r"^  step 2/2 \(100%\), [\d.]+ s each · reward ", text, re.MULTILINE)
    assert "━" not in text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    # tiny-random's workers are mostly the Python around a few MiB of weights: no warning
    # that they peaked over the plan (they did, 1.2x to 1.5x, and every tiny run said so)
    (events,) = (tmp_path / "runs").glob("*/events.log")
    assert "the plan's" not in events.read_text()


def test_a_callers_eta_is_shown_and_counted_down() -> None:
    """A run gives its own estimate (runs/step_eta.py): the line shows it, and a later line
    of the same state counts it down, rather than the rate since the first report."""
    lines, written, clock = _lines()
    lines.update("step", 0, 10, seconds_each=True)
    clock.now = 100.0
    lines.update("step", 1, 10, seconds_each=True, eta_s=90.0)  # the rate would say 900 s
    assert written == ["  step 1/10 (10%), 100.0 s each, eta 1m30s"]
    clock.now = 130.0
    lines.beat()
    assert written[1:] == ["  step 1/10 (10%), 130.0 s each, eta 1m00s"]

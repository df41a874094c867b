"""`roll logs`: events and step lines merged in time order, half-written lines, following."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs.log_tail import RunTail, follow, format_step
from rollcli.runs.run_dir import RunDir

runner = CliRunner()
T0 = datetime(2026, 1, 1, 10, 0, 0).timestamp()  # local time, as events.log writes it

STEP_1 = {
    "step": 1,
    "reward/mean": 0.25,
    "actor/kl": 0.0012,
    "actor/entropy": 0.7,
    "response_length/mean": 14.5,
    "time/step_s": 30.0,
}
STEP_2 = {
    "step": 2,
    "reward/mean": 0.5,
    "val/accuracy": 0.5,
    "actor/kl": 0.01,
    "actor/entropy": 0.65,
    "response_length/mean": 12.0,
    "time/step_s": 30.0,
}


def _event(run: RunDir, at: float, message: str) -> None:
    stamp = datetime.fromtimestamp(at).strftime("%Y-%m-%d %H:%M:%S")
    with (run.root / "events.log").open("a", encoding="utf-8") as fh:
        fh.write(f"{stamp}  {message}\n")


def _samples(run: RunDir, step: int, at: float) -> None:
    """A step's samples file, dated when the step logged (the time its metrics row gets)."""
    run.write_samples(step, [{"prompt": "1+1", "response": "2", "reward": 1.0}])
    os.utime(run.samples / f"step-{step}.jsonl", (at, at))


@pytest.fixture
def finished_run(tmp_path: Path) -> RunDir:
    """A 2-step run written the way the pipeline writes one (each row with its clock time)."""
    run = RunDir.create(tmp_path / "runs", "run-a", "name: rlvr-math\n")
    run.write_status("finished", total_steps=2)
    _event(run, T0, "run run-a started")
    _event(run, T0 + 10, "validation: accuracy 0.250 on 4 held-out prompts (greedy)")
    run.log_metrics({"step": 0, "val/accuracy": 0.25, "time/validate_s": 1.0, "time": T0 + 10.5})
    run.log_metrics({**STEP_1, "time": T0 + 40.5})
    _samples(run, 1, T0 + 40.5)
    _event(run, T0 + 70, "validation: accuracy 0.500 on 4 held-out prompts (greedy)")
    run.log_metrics({**STEP_2, "time": T0 + 70.5})
    _samples(run, 2, T0 + 70.5)
    _event(run, T0 + 72, "checkpoint written: runs/run-a/checkpoints/step-2")
    _event(run, T0 + 72, "finished")
    with (run.root / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 3, "reward/me')  # a line a kill cut in half
    return run


EXPECTED = [
    "10:00:00  run run-a started",
    "10:00:10  validation: accuracy 0.250 on 4 held-out prompts (greedy)",
    "10:00:10  step 0/2  val acc 0.250  (before training)",
    "10:00:40  step 1/2  reward 0.250  kl 0.0012  entropy 0.700  len 14.5  30.0 s",
    "10:01:10  validation: accuracy 0.500 on 4 held-out prompts (greedy)",
    "10:01:10  step 2/2  reward 0.500  val acc 0.500  kl 0.0100  entropy 0.650  len 12.0  30.0 s",
    "10:01:12  checkpoint written: runs/run-a/checkpoints/step-2",
    "10:01:12  finished",
]


def test_format_step_shows_what_the_row_has() -> None:
    assert format_step(STEP_2, 200) == (
        "step   2/200  reward 0.500  val acc 0.500  kl 0.0100  entropy 0.650  len 12.0  30.0 s"
    )
    assert format_step({"step": 4, "reward/mean": 1.0}) == "step 4  reward 1.000"
    agentic = {"step": 3, "agentic/informative_groups": 0.25, "agentic/first_action_entropy": 0.4}
    agentic |= {"agentic/action_frac/Left": 0.2, "agentic/action_frac/Down": 0.7}
    assert format_step(agentic) == "step 3  informative 0.25  action H 0.40  top Down 0.70"
    tools = {"step": 5, "env/tool_calls": 40.0, "env/tool_calls_per_episode": 1.25}
    tools |= {"env/tool_call_valid": 0.6, "env/tool_errors": 16.0}
    tools |= {"env/tool_error/malformed": 12.0, "env/tool_error/raised": 4.0}
    assert format_step(tools) == (
        "step 5  calls/ep 1.25  call valid 0.60  tool errors 16 (malformed 12)"
    )
    assert format_step(tools | {"env/tool_errors": 0.0}) == (
        "step 5  calls/ep 1.25  call valid 0.60  tool errors 0"
    )


def test_mfu_logged_above_100_percent_shows_against_a_raised_peak(tmp_path: Path) -> None:
    """An older run's rows divided by a busy machine's probe (66.8 GFLOP/s): step 2's train
    phase at 119.3% shows as 100% with a line saying why, and later rows keep the new peak."""
    run = RunDir.create(tmp_path, "run-mfu", "name: x\n")
    rows = [
        {"step": 1, "perf/peak_gflops": 66.8, "perf/train_mfu": 0.5, "time": T0 + 1},
        {"step": 2, "perf/peak_gflops": 66.8, "perf/forward_mfu": 1.089,
         "perf/train_mfu": 1.193, "time": T0 + 2},
        {"step": 3, "perf/peak_gflops": 66.8, "perf/train_mfu": 0.5, "time": T0 + 3},
    ]  # fmt: skip
    for row in rows:
        run.log_metrics(row)
    lines = [line.text for line in RunTail(run).poll()]
    assert lines == [
        "step 1  mfu train 50.0%",
        "perf: step 2's train phase ran at 79.7 GFLOP/s, above the run's recorded peak of "
        "66.8; MFU shown against 79.7 GFLOP/s",
        "step 2  mfu fwd 91.3% train 100.0%",
        "step 3  mfu train 41.9%",
    ]


LONG_STEP = {  # a tool env's step with every part `roll logs` shows: 278 columns whole
    **STEP_2,
    "agentic/informative_groups": 0.5,
    "agentic/first_action_entropy": 0.4,
    "agentic/action_frac/calc": 0.75,
    "env/tool_calls_per_episode": 1.25,
    "env/tool_call_valid": 0.8,
    "env/tool_errors": 16.0,
    "env/tool_error/malformed": 12.0,
    "agentic/template_drift": 0.25,
    "perf/generate_mfu": 0.031,
    "perf/train_mfu": 0.254,
    "rollout/mismatch_kl": 0.0003,
    "rollout/mismatch_ratio_min": 0.52,
    "rollout/mismatch_ratio_max": 1.91,
}


def test_a_compact_step_line_leaves_out_the_least_telling_parts_first() -> None:
    whole = format_step(LONG_STEP, 200)
    assert len(whole) == 278
    # ranks 1-2: reward, val acc, the time; 3: kl, then the template's drift (the later one
    # of a rank goes first), which does not fit in 70 columns; 4: informative, tool errors
    assert format_step(LONG_STEP, 200, width=70) == (
        "step   2/200  reward 0.500  val acc 0.500  kl 0.0100  30.0 s"
    )
    assert format_step(LONG_STEP, 200, width=100) == (
        "step   2/200  reward 0.500  val acc 0.500  kl 0.0100  informative 0.50  "
        "template drift 0.25  30.0 s"
    )
    assert format_step({"step": 4, "reward/mean": 1.0}, width=10) == "step 4"


def test_logs_fit_80_columns_and_wide_keeps_each_line_whole(finished_run: RunDir) -> None:
    model = "/root/.cache/roll/models/smollm2-135m-instruct-converted"
    _event(finished_run, T0 + 73, f"run run-a started: recipe rlvr-math, model m ({model})")
    with (finished_run.root / "metrics.jsonl").open("a") as fh:
        fh.write("\n")  # the half-written line ends, never to parse
    finished_run.log_metrics({**LONG_STEP, "step": 3, "time": T0 + 74})
    args = ["logs", "run-a", "--runs-dir", str(finished_run.root.parent)]
    lines = runner.invoke(app, args, env={"COLUMNS": "80"}).stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [x for x in lines if len(x) > 80]
    assert (
        lines[5] == "10:01:10  step 2/2  reward 0.500  val acc 0.500  kl 0.0100  len 12.0  30.0 s"
    )
    # the event wraps under its text, no word or path broken
    assert lines[-3:-1] == [
        "10:01:13  run run-a started: recipe rlvr-math, model m",
        f"          ({model})",
    ]
    assert lines[-1].startswith("10:01:14  step 3/2  reward 0.500  val acc 0.500  kl 0.0100")
    wide = runner.invoke(app, [*args, "--wide"], env={"COLUMNS": "80"}).stdout.splitlines()
    assert wide[:-2] == EXPECTED
    assert wide[-2] == f"10:01:13  run run-a started: recipe rlvr-math, model m ({model})"
    assert wide[-1] == "10:01:14  " + format_step({**LONG_STEP, "step": 3}, 2)


def test_logs_merges_events_and_steps_in_time_order(finished_run: RunDir) -> None:
    runs_dir = str(finished_run.root.parent)
    result = runner.invoke(app, ["logs", "run-a", "--runs-dir", runs_dir, "--wide"])
    assert result.exit_code == 0, result.stderr
    # the half-written step 3 is skipped
    assert result.stdout.splitlines() == EXPECTED

    last3 = runner.invoke(app, ["logs", "run-a", "--runs-dir", runs_dir, "-n", "3", "--wide"])
    assert last3.stdout.splitlines() == EXPECTED[-3:]
    by_path = runner.invoke(app, ["logs", str(finished_run.root), "-n", "1"])
    assert by_path.stdout.splitlines() == EXPECTED[-1:]


def test_recorded_clock_times_order_the_rows(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-t", "name: x\n")
    _event(run, T0, "started")
    _event(run, T0 + 20, "validation: accuracy 1.000 on 1 held-out prompts (greedy)")
    _event(run, T0 + 20, "checkpoint written: runs/run-t/checkpoints/step-2")
    with (run.root / "events.log").open("a") as fh:  # a stamp with fractions of a second
        fh.write("2026-01-01 10:00:20.900  finished\n")
    run.log_metrics({**STEP_1, "time": T0 + 10.2})
    run.log_metrics({**STEP_2, "time": T0 + 20.7})
    lines = [line.render()[:16] for line in RunTail(run).poll()]
    # events.log stamps whole seconds: within step 2's second its validation comes first,
    # its checkpoint after it
    assert lines == [
        "10:00:00  starte",
        "10:00:10  step 1",
        "10:00:20  valida",
        "10:00:20  step 2",
        "10:00:20  checkp",
        "10:00:20  finish",
    ]


def test_a_half_written_line_shows_once_it_is_complete(finished_run: RunDir) -> None:
    tail = RunTail(finished_run)
    assert [line.text for line in tail.poll() if line.kind == "step"][-1].startswith("step 2/2")
    assert tail.poll() == []
    with (finished_run.root / "metrics.jsonl").open("a") as fh:
        fh.write('an": 0.75, "time/step_s": 31.0}\n{"step": 4, "reward/mean": 0.8}\n')
    texts = [line.text for line in tail.poll()]
    assert texts == ["step 3/2  reward 0.750  31.0 s", "step 4/2  reward 0.800"]


def test_follow_prints_new_lines_until_the_run_finishes(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-f", "name: x\n")
    run.write_status("running", total_steps=2)  # our own pid: alive
    run.log_event("run run-f started")
    tail = RunTail(run)
    tail.poll()  # what `roll logs` printed before following

    def step_the_run(polls: int) -> None:  # stands in for the training process between polls
        if polls == 1:
            run.log_metrics(STEP_1)
        elif polls == 2:
            with (run.root / "metrics.jsonl").open("a") as fh:
                fh.write('{"step": 2, "time": %.3f, "reward/mean": 0.5' % (time.time() - 1))
        elif polls == 3:
            with (run.root / "metrics.jsonl").open("a") as fh:
                fh.write("}\n")
            run.log_event("finished")
            run.write_status("finished")
        else:
            raise AssertionError("follow kept polling a finished run")

    polls = []
    seen = []
    status = follow(
        tail, seen.append, poll_s=0.01, sleep=lambda s: (polls.append(s), step_the_run(len(polls)))
    )
    assert status == "finished"
    assert len(polls) == 3
    assert [line.text for line in seen] == [
        "step 1/2  reward 0.250  kl 0.0012  entropy 0.700  len 14.5  30.0 s",
        "step 2/2  reward 0.500",
        "finished",
    ]


def test_logs_follow_through_the_cli_stops_when_status_becomes_finished(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-live", "name: x\n")
    run.write_status("running", total_steps=1)
    run.log_event("run run-live started")

    def train() -> None:
        time.sleep(0.3)
        run.log_metrics({"step": 1, "reward/mean": 1.0, "time/step_s": 0.3})
        run.log_event("finished")
        run.write_status("finished")

    def too_slow(signum, frame) -> None:  # noqa: ANN001
        raise TimeoutError("roll logs -f did not stop")

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(30)
    writer = threading.Thread(target=train)
    writer.start()
    try:
        result = runner.invoke(
            app, ["logs", "run-live", "-f", "--poll", "0.05", "--runs-dir", str(tmp_path)]
        )
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        writer.join()
    assert result.exit_code == 0, result.exception
    lines = [line[10:] for line in result.stdout.splitlines()]
    assert lines == ["run run-live started", "step 1/1  reward 1.000  0.3 s", "finished"]
    assert "run run-live is finished" in result.stderr


def test_follow_stops_when_the_process_is_gone(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "run-k", "name: x\n")
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    status = {"status": "running", "pid": int(gone.stdout), "heartbeat": time.time()}
    (run.root / "status.json").write_text(json.dumps(status))
    result = runner.invoke(app, ["logs", "run-k", "-f", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0
    assert "run run-k is killed (its process is gone)" in result.stderr


def test_unknown_run_is_a_one_line_error_with_a_suggestion(finished_run: RunDir) -> None:
    result = runner.invoke(app, ["logs", "run-b", "--runs-dir", str(finished_run.root.parent)])
    assert result.exit_code == 2
    assert (  # one message, wrapped at 80 columns
        " ".join(result.stderr.split())
        == "error: no run 'run-b' in " + str(finished_run.root.parent) + " (did you mean 'run-a'?)"
    )


def test_an_event_written_just_after_a_row_comes_after_it(tmp_path: Path, monkeypatch) -> None:
    run = RunDir.create(tmp_path, "run-ms", "name: x\n")
    # a stand-in clock: the row is written 0.6 ms into a millisecond and the event 0.1 ms
    # later, so its stamp (cut to the millisecond) is that millisecond's start
    monkeypatch.setattr("rollcli.runs.run_dir.time.time", lambda: T0 + 5.1236)
    run.log_metrics({"step": 1, "reward/mean": 1.0})
    monkeypatch.undo()
    with (run.root / "events.log").open("a") as fh:
        fh.write("2026-01-01 10:00:05.123  finished\n")
    assert [line.kind for line in RunTail(run).poll()] == ["step", "event"]

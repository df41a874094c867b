"""`roll runs gc` and `roll runs rm` on run folders written by the code's own writers
(`RunDir`, `write_checkpoint`) with real files of known sizes: what gc lists is what it
deletes, with the bytes it says; a live run (its status.json's pid is this process) is
never touched."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from error_text import error_message, flat
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs.best import mark_best
from rollcli.runs.checkpoint import complete_checkpoints, write_checkpoint
from rollcli.runs.run_dir import RunDir

runner = CliRunner()
MB = 2**20
DAY = 86400


def _fill(size: int):  # noqa: ANN202
    def fill(folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(b"w" * size)
        (folder / "actor_optim.pt").write_bytes(b"o" * 2 * size)

    return fill


def _run(runs: Path, run_id: str, steps: list[int], status: str = "finished", size=MB) -> Path:
    """A run whose checkpoints each hold `size` bytes of weights and 2x that of optimizer."""
    run = RunDir.create(runs, run_id, "name: rlvr-math\n")
    for step in steps:
        write_checkpoint(run.checkpoints, step, _fill(size), {"step": step}, keep_last=99)
    run.write_status(status, recipe="rlvr-math", model="tiny-random", step=steps[-1])
    return run.root


def _age(checkpoint: Path, days: float) -> None:
    """Make `checkpoint` look written `days` ago (its COMPLETE marker's time)."""
    stamp = time.time() - days * DAY
    os.utime(checkpoint / "COMPLETE", (stamp, stamp))


def _steps(run: Path) -> list[int]:
    return [step for step, _ in complete_checkpoints(run / "checkpoints")]


def _roll(*args: str):  # noqa: ANN202
    return runner.invoke(app, list(args), env={"COLUMNS": "80"})


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_gc_keep_last_lists_then_frees_exactly_what_it_listed(tmp_path) -> None:
    runs = tmp_path / "runs"
    a = _run(runs, "a", [1, 2, 3])
    b = _run(runs, "b", [5, 10], size=2 * MB)
    # a kill left step 4 of run a half-written: never read, always deleted
    half = a / "checkpoints" / ".tmp-step-4"
    half.mkdir()
    (half / "model.safetensors").write_bytes(b"w" * MB)
    doomed = [a / "checkpoints" / "step-1", a / "checkpoints" / "step-2", half]
    doomed.append(b / "checkpoints" / "step-5")
    sizes = [_bytes(p) for p in doomed]
    assert sizes[0] == 3 * MB + len("1") + len('{\n  "step": 1\n}')  # weights, optimizer, state

    dry = _roll("runs", "gc", "--keep-last", "1", "--runs-dir", str(runs))
    assert dry.exit_code == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert lines[0] == "a" and lines[4] == "b"
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert listed == ["step-1", "step-2", ".tmp-step-4", "step-5"]
    assert "half-written" in lines[3]
    total = f"{sum(sizes) / MB:.1f} MB"  # 3 + 3 + 1 + 6 MB and the state files
    assert total == "13.0 MB"
    assert lines[-1] == f"would free {total} (4 checkpoints of 2 runs); --yes deletes them"
    assert all(p.exists() for p in doomed)  # a dry run deletes nothing
    assert max(len(line) for line in lines) <= 80

    before = _bytes(runs)
    done = _roll("runs", "gc", "--keep-last", "1", "--runs-dir", str(runs), "--yes")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[:-1] == lines[:-1]  # the same list
    assert done.stdout.splitlines()[-1] == f"freed {total} (4 checkpoints of 2 runs)"
    assert not any(p.exists() for p in doomed)
    assert before - _bytes(runs) == sum(sizes)
    assert _steps(a) == [3] and _steps(b) == [10]
    assert sorted(p.name for p in (a / "checkpoints").iterdir()) == ["step-3"]  # no leftovers

    again = _roll("runs", "gc", "--keep-last", "1", "--runs-dir", str(runs))
    assert again.stdout == "nothing to delete\n"


def test_gc_keeps_the_best_with_keep_best_and_the_young_with_older_than(tmp_path) -> None:
    runs = tmp_path / "runs"
    run = _run(runs, "r", [2, 4, 6, 8])
    ckpts = run / "checkpoints"
    mark_best(ckpts, 4, "val/accuracy", 0.5, 0.5)
    for step, days in ((2, 10), (4, 9), (6, 8), (8, 0.5)):
        _age(ckpts / f"step-{step}", days)

    dry = _roll("runs", "gc", "r", "--keep-last", "1", "--runs-dir", str(runs))
    rows = [line.split() for line in dry.stdout.splitlines() if line.startswith("  ")]
    assert [(r[0], r[3], r[-1]) for r in rows] == [
        ("step-2", "10d", "old"),
        ("step-4", "9d", "best"),  # listed, and marked: without --keep-best it goes
        ("step-6", "8d", "old"),
    ]
    best = _roll("runs", "gc", "r", "--keep-last", "1", "--keep-best", "--runs-dir", str(runs))
    assert [line.split()[0] for line in best.stdout.splitlines()[1:-1]] == ["step-2", "step-6"]

    # no --keep-last: every checkpoint older than 8.5 days, the newest included if it were
    old = _roll("runs", "gc", "--older-than", "8.5d", "--yes", "--runs-dir", str(runs))
    assert old.exit_code == 0, old.stderr
    assert _steps(run) == [6, 8]
    json.loads((ckpts / "best.json").read_text())  # best.json stays: the run's record

    newest = _roll("runs", "gc", "--older-than", "12h", "--keep-last", "0", "--runs-dir", str(runs))
    assert [line.split()[0] for line in newest.stdout.splitlines()[1:-1]] == ["step-6", "step-8"]


def test_gc_never_touches_a_live_run(tmp_path) -> None:
    runs = tmp_path / "runs"
    live = _run(runs, "live", [1, 2, 3], status="running")  # pid: this process, alive
    assert json.loads((live / "status.json").read_text())["pid"] == os.getpid()
    (live / "checkpoints" / ".tmp-step-4").mkdir()  # being written right now
    done = _roll("runs", "gc", "--keep-last", "1", "--yes", "--runs-dir", str(runs))
    assert done.exit_code == 0
    assert done.stdout == "nothing to delete\n"
    assert f"skipped live: running (pid {os.getpid()} on " in done.stderr
    assert _steps(live) == [1, 2, 3] and (live / "checkpoints" / ".tmp-step-4").is_dir()


def test_gc_keeps_a_checkpoint_another_run_started_from(tmp_path) -> None:
    runs = tmp_path / "runs"
    base = _run(runs, "base", [1, 2])
    child = RunDir.create(runs, "child", "name: sft\n")
    child.write_status("finished", model=str((base / "checkpoints" / "step-1").resolve()))
    dry = _roll("runs", "gc", "base", "--keep-last", "0", "--runs-dir", str(runs))
    assert "kept base/step-1: run child started from it" in dry.stderr
    assert [line.split()[0] for line in dry.stdout.splitlines()[1:-1]] == ["step-2"]


def test_gc_asks_for_a_rule_and_reads_ages(tmp_path) -> None:
    _run(tmp_path, "r", [1])
    none = _roll("runs", "gc", "--runs-dir", str(tmp_path))
    assert none.exit_code == 2 and "--keep-last K, --older-than AGE" in none.stderr
    bad = _roll("runs", "gc", "--older-than", "7 days", "--runs-dir", str(tmp_path))
    assert bad.exit_code == 2
    assert "--older-than '7 days': write an age as 7d, 12h, 30m, 90s or 2w" in bad.stderr
    missing = _roll("runs", "gc", "--keep-last", "1", "--runs-dir", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and "does not exist" in flat(missing.stderr)


def test_rm_refuses_a_live_run_and_removes_nothing(tmp_path) -> None:
    runs = tmp_path / "runs"
    done = _run(runs, "done", [1])
    live = _run(runs, "live", [1, 2], status="running")
    result = _roll("runs", "rm", "done", "live", "--runs-dir", str(runs))
    assert result.exit_code == 2
    message = error_message(result.stderr)  # one message
    assert f"run live is running (pid {os.getpid()} on " in message
    assert "nothing was removed" in message
    assert done.is_dir() and live.is_dir() and _steps(live) == [1, 2]


def test_rm_deletes_a_stopped_run_whole_and_says_how_much(tmp_path) -> None:
    runs = tmp_path / "runs"
    gone = _run(runs, "gone", [1, 2], status="interrupted")
    size = _bytes(gone)
    kept = _run(runs, "kept", [1])
    result = _roll("runs", "rm", "gone", "--runs-dir", str(runs))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"removed {gone} ({size / MB:.1f} MB)\n"
    assert sorted(p.name for p in runs.iterdir()) == ["kept"]  # no `.removing-gone` left
    assert kept.is_dir()
    ls = _roll("runs", "ls", "--runs-dir", str(runs))
    assert "gone" not in ls.stdout and "kept" in ls.stdout


def test_rm_refuses_a_run_another_started_from_unless_forced(tmp_path) -> None:
    runs = tmp_path / "runs"
    base = _run(runs, "base", [3])
    child = RunDir.create(runs, "child", "name: sft\n")
    child.write_status("finished", model=str((base / "checkpoints" / "step-3").resolve()))
    refused = _roll("runs", "rm", "base", "--runs-dir", str(runs))
    assert refused.exit_code == 2 and base.is_dir()
    assert "base/step-3 is run child's model" in refused.stderr and "--force" in refused.stderr
    both = _roll("runs", "rm", "base", "child", "--runs-dir", str(runs))  # together: fine
    assert both.exit_code == 0, both.stderr
    assert both.stdout.splitlines()[-1].startswith("2 runs removed, ")
    assert list(runs.iterdir()) == []


def test_rm_of_an_unknown_run_removes_nothing(tmp_path) -> None:
    run = _run(tmp_path, "rlvr-math-1", [1])
    result = _roll("runs", "rm", "rlvr-math-1", "rlvr-math-2", "--runs-dir", str(tmp_path))
    assert result.exit_code == 2 and "no run 'rlvr-math-2'" in result.stderr
    assert run.is_dir()


@pytest.mark.parametrize("text", ["7", "d", "-1d", "7days"])
def test_bad_ages_are_refused(text: str) -> None:
    from rollcli.runs.retention import parse_age

    with pytest.raises(ValueError, match="write an age as"):
        parse_age(text)

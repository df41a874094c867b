"""Each role's measured peak memory beside the plan's: the PSS read of a real process, the
`memory.json` a run writes, its warning past 15% over the plan, and `roll runs show`."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs.peak_memory import MEMORY_FILE, PeakMemory, pss_bytes, read_memory
from rollcli.runs.run_dir import RunDir

runner = CliRunner()
MiB = 2**20

# A child that touches 200 MiB of private memory, says so, and waits to be killed.
HOLD_200_MIB = (
    "import sys, time\n"
    "block = bytearray(200 * 2**20)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_pss_of_a_real_process_counts_the_memory_it_touched() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_200_MIB], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        pss = pss_bytes(child.pid)
        assert pss is not None
        # 200 MiB private, plus the interpreter's own share (a few MiB)
        assert 200 * MiB <= pss < 260 * MiB, pss / MiB
    finally:
        child.kill()
        child.wait()
    assert pss_bytes(child.pid) is None  # gone


def test_a_sampled_peak_is_written_as_the_run_goes(tmp_path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_200_MIB], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        memory = PeakMemory(
            tmp_path, {"actor_train": 250 * MiB}, interval_s=0.05, write_every_s=0.0
        )
        memory.watch({"actor_train": [child.pid]})
        deadline = time.monotonic() + 10
        while (
            not read_memory(tmp_path).get("roles", {}).get("actor_train", {}).get("measured_bytes")
        ):
            assert time.monotonic() < deadline, "memory.json was not written while running"
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    memory.stop()  # the process is gone: its peak stays
    rows = read_memory(tmp_path)["roles"]
    assert rows["actor_train"]["planned_bytes"] == 250 * MiB
    assert 200 * MiB <= rows["actor_train"]["measured_bytes"] < 260 * MiB
    assert rows["driver"]["planned_bytes"] is None  # this process, unplanned
    assert read_memory(tmp_path)["measure"] == "pss"


def test_a_peak_over_115_percent_of_the_plan_warns_once_naming_the_role(tmp_path) -> None:
    run = RunDir.create(tmp_path, "r", "name: x\n")
    memory = PeakMemory(
        run.root,
        {"actor_train": 1000 * MiB, "reference": 1000 * MiB},
        log_event=run.log_event,
        step=lambda: 3,
    )
    memory.update("reference", 1150 * MiB)  # exactly 15% over: no warning
    memory.update("actor_train", 1100 * MiB)
    memory.update("actor_train", 1200 * MiB)  # 20% over
    memory.update("actor_train", 1300 * MiB)  # still over: no second warning
    events = (run.root / "events.log").read_text().splitlines()
    warnings = [e for e in events if "warning" in e]
    assert len(warnings) == 1
    assert (
        "warning: actor_train peaked at 1,200 MiB (pss), 1.20x the plan's 1,000 MiB"
        in (warnings[0])
    )
    row = read_memory(run.root)["roles"]["actor_train"]  # the warning wrote the file
    assert row["measured_bytes"] == 1200 * MiB and row["at_step"] == 3
    # a resumed run keeps the peaks and does not warn again
    again = PeakMemory(run.root, {"actor_train": 1000 * MiB}, log_event=run.log_event)
    again.update("actor_train", 1250 * MiB)
    assert sum("warning" in e for e in (run.root / "events.log").read_text().splitlines()) == 1


def test_a_run_that_asks_for_no_warning_records_its_peaks_silently(tmp_path) -> None:
    run = RunDir.create(tmp_path, "r", "name: x\n")  # tiny-random's runs (runtime/run_control)
    memory = PeakMemory(run.root, {"actor_train": 100 * MiB}, log_event=run.log_event, warn=False)
    memory.update("actor_train", 300 * MiB)
    memory.write()
    assert not (run.root / "events.log").exists()
    assert read_memory(run.root)["roles"]["actor_train"]["measured_bytes"] == 300 * MiB


def test_runs_show_prints_planned_measured_and_ratio_per_role(tmp_path) -> None:
    folder = tmp_path / "rlvr-math-1"
    folder.mkdir()
    (folder / "recipe.yaml").write_text("name: rlvr-math\n")
    (folder / "status.json").write_text(
        json.dumps({"status": "finished", "recipe": "rlvr-math", "step": 2, "total_steps": 2})
    )
    roles = {
        "actor_train": {"planned_bytes": 3000 * MiB, "measured_bytes": 2850 * MiB, "at_step": 1},
        "reward": {"planned_bytes": 200 * MiB, "measured_bytes": 300 * MiB, "at_step": 2},
        "driver": {"planned_bytes": None, "measured_bytes": 400 * MiB, "at_step": 0},
    }
    (folder / MEMORY_FILE).write_text(json.dumps({"measure": "pss", "roles": roles}))
    result = runner.invoke(
        app, ["runs", "show", "rlvr-math-1", "--runs-dir", str(tmp_path)], terminal_width=100
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["role", "planned"])
    assert header.split() == ["role", "planned", "measured", "ratio", "at", "step"]
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
    assert rows["actor_train"] == ["3,000", "2,850", "0.95", "1"]
    assert rows["reward"] == ["200", "300", "1.50", "2"]
    assert rows["driver"] == ["-", "400", "-", "0"]
    as_json = runner.invoke(
        app, ["runs", "show", "rlvr-math-1", "--runs-dir", str(tmp_path), "--json"]
    )
    assert json.loads(as_json.output)["memory"]["roles"]["reward"]["measured_bytes"] == 300 * MiB

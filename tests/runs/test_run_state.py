"""The pieces resume stands on: atomic checkpoints, rewinding the run folder, the status,
fault specs, RNG capture, and the record of what a resume changed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest

from rollcli.runs.checkpoint import complete_checkpoints, latest_checkpoint, write_checkpoint
from rollcli.runs.faults import Fault, FaultInjector, FaultSpecError, parse_faults
from rollcli.runs.run_dir import STALE_AFTER_S, RunDir


def _fill(folder) -> None:
    (folder / "model.safetensors").write_bytes(b"weights")


def test_checkpoint_is_invisible_until_renamed_and_old_ones_are_pruned(tmp_path):
    ckpts = tmp_path / "checkpoints"
    seen_during_write = []

    def before_rename() -> None:
        seen_during_write.append(latest_checkpoint(ckpts))

    for step in (1, 2, 3):
        write_checkpoint(
            ckpts, step, _fill, {"step": step}, keep_last=2, before_rename=before_rename
        )
    # while step N was being written the newest complete checkpoint was N-1
    assert [p.name if p else None for p in seen_during_write] == [None, "step-1", "step-2"]
    assert [s for s, _ in complete_checkpoints(ckpts)] == [2, 3]
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-2", "step-3"]
    state = json.loads((ckpts / "step-3" / "trainer_state.json").read_text())
    assert state == {"step": 3}


def test_a_checkpoint_killed_mid_write_is_ignored_then_cleaned(tmp_path):
    ckpts = tmp_path / "checkpoints"
    write_checkpoint(ckpts, 1, _fill, {"step": 1}, keep_last=2)
    script = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from rollcli.runs.checkpoint import write_checkpoint\n"
        "def fill(f): (f / 'model.safetensors').write_bytes(b'w')\n"
        "write_checkpoint(Path(sys.argv[1]), 2, fill, {'step': 2}, 2,\n"
        "    before_rename=lambda: os.kill(os.getpid(), signal.SIGKILL))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(ckpts)])
    assert proc.returncode == -9
    assert (ckpts / ".tmp-step-2" / "COMPLETE").exists()  # written, never renamed
    assert latest_checkpoint(ckpts).name == "step-1"
    write_checkpoint(ckpts, 2, _fill, {"step": 2}, keep_last=2)
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-1", "step-2"]


def test_rewind_drops_what_was_logged_after_the_checkpoint(tmp_path):
    run = RunDir.create(tmp_path, "r", "name: x\n")
    for step in range(5):
        run.log_metrics({"step": step})
        if step:
            run.write_samples(step, [{"step": step}])
    with (run.root / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 5, "rew')  # a line cut by a kill
    run.rewind(step=2, metrics_lines=3)
    assert [m["step"] for m in run.read_metrics()] == [0, 1, 2]
    assert sorted(p.name for p in run.samples.iterdir()) == ["step-1.jsonl", "step-2.jsonl"]
    run.log_metrics({"step": 3})
    assert [m["step"] for m in run.read_metrics()] == [0, 1, 2, 3]


def test_status_is_killed_when_the_pid_is_gone_or_the_heartbeat_stale(tmp_path):
    run = RunDir.create(tmp_path, "r", "name: x\n")
    run.write_status("running", step=3)
    assert run.effective_status() == "running"  # this process
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True)  # fmt: skip
    data = run.read_status()
    (run.root / "status.json").write_text(json.dumps({**data, "pid": int(dead.stdout)}))
    assert run.effective_status() == "killed"
    stale = {**data, "heartbeat": time.time() - STALE_AFTER_S - 1}
    (run.root / "status.json").write_text(json.dumps(stale))
    assert run.effective_status() == "killed"
    run.write_status("finished")
    assert run.effective_status() == "finished"
    assert run.read_status()["step"] == 3  # fields survive status changes


def test_heartbeat_thread_refreshes_the_status(tmp_path):
    run = RunDir.create(tmp_path, "r", "name: x\n")
    run.write_status("running", step=1)
    first = run.read_status()["heartbeat"]
    stop = run.start_heartbeat(every_s=0.05)
    time.sleep(0.3)
    stop.set()
    data = run.read_status()
    assert data["heartbeat"] > first and data["status"] == "running" and data["step"] == 1


def test_fault_specs_parse_and_bad_ones_say_how_to_write_them():
    assert parse_faults("kill@train:3, kill-worker@generate:2+0.5") == [
        Fault("kill", "train", 3, 0.0),
        Fault("kill-worker", "generate", 2, 0.5),
    ]
    assert parse_faults("") == []
    with pytest.raises(FaultSpecError, match="ACTION@POINT:STEP"):
        parse_faults("kill-train-3")
    with pytest.raises(FaultSpecError, match="unknown point 'trian'"):
        parse_faults("kill@trian:3")


def test_a_fault_fires_once_at_its_point_and_step():
    killed = []
    faults = FaultInjector(parse_faults("kill-worker@reward:2"), killed.append)
    faults.hit("reward", 1)
    faults.hit("train", 2)
    assert killed == []
    faults.hit("reward", 2)
    faults.hit("reward", 2)
    assert killed == ["reward"]


def test_rng_capture_restores_python_numpy_and_torch():
    import numpy as np
    import torch

    from rollcli.runs.rng import capture_rng, restore_rng

    state = capture_rng()
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    restore_rng(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first


def test_config_changes_name_only_the_keys_that_differ():
    from rollcli.config.loader import load_recipe
    from rollcli.launch.launch import config_changes

    base, _ = load_recipe("rlvr-math", [])
    same, _ = load_recipe("rlvr-math", [f"train.steps={base.train.steps}"])  # its own value
    steps = base.train.steps + 10
    more, _ = load_recipe("rlvr-math", [f"train.steps={steps}", "train.lr=2e-5"])
    assert config_changes(base, same) == []
    assert config_changes(base, more) == [
        "train.lr: 1e-05 -> 2e-05",
        f"train.steps: {base.train.steps} -> {steps}",
    ]


def test_a_run_folder_that_holds_a_run_points_to_resume(tmp_path):
    run = RunDir.create(tmp_path, "r", "name: x\n")
    run.log_metrics({"step": 0})
    with pytest.raises(FileExistsError, match="roll resume r"):
        RunDir.create(tmp_path, "r", "name: x\n")
    assert os.path.exists(run.root / "recipe.yaml")

"""The GPU proof kit's `train-cli` case: `roll train` itself, through the real CLI and Ray.

`roll train rlvr-math --model FOLDER --gpus 1` (a registry model's shapes with random
weights: `rollcli.models.shapes`; `--gpus 0` on a CPU) with actor_train, actor_infer and the
reference colocated on the one device (the recipe's default mapping), in parts, each a row
of the kit's jsonl as it ends (so a lease that ends mid-way keeps what ran):

1. `ray`: the Ray this Python imports (on the GPU machine: the kit's trimmed cp312 build,
   `bench/ray_trim.py`) starts a local cluster and runs a task;
2. `train`: 3 steps and a checkpoint of step 3, then the driver SIGKILLed as step 4 starts
   generating (`ROLL_INJECT_FAULT=kill@generate:4`: the same point on every device, where a
   kill from outside would race a fast step 4) and then its whole process group (Ray's
   daemons and workers outlive a killed driver);
3. `resume`: `roll resume RUN_ID` trains step 4 from the step-3 checkpoint.

Each row carries the run's per-step phase times (`time/*` of metrics.jsonl), each role's
peak memory beside the plan's (`memory.json`: PSS on a CPU, `max_memory_allocated` on a
GPU) and the tail of events.log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

GIB = 1024**3
RUN_ID = "train-cli"
KILL_AT = 4  # the driver dies as this step starts generating; the last checkpoint is the one before

RAY_CHECK = """
import time, ray
start = time.perf_counter()
ray.init(address="local", num_cpus=1, include_dashboard=False)
assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42
print(ray.__version__, ray.__file__, round(time.perf_counter() - start, 2))
ray.shutdown()
"""


def overrides(device: str) -> list[str]:
    """rlvr-math at the case's scale: a few seconds a step of a 0.5B model on a GPU, a few on
    a CPU for tiny-random. Validation at the start and at the end (`run.eval_every=0`)."""
    if device == "cuda":
        batch = ["rollout.batch_size=32", "rollout.group_size=4", "rollout.max_new_tokens=128"]
        batch += ["data.val_size=16", "train.micro_batch_size=8"]
    else:
        batch = ["rollout.batch_size=4", "rollout.group_size=2", "rollout.max_new_tokens=8"]
        batch += ["data.val_size=4", "train.micro_batch_size=4"]
    return [*batch, "data.train_size=64", "run.eval_every=0", "rollout.engine=hf"]


def roll(args: list[str], cwd: Path, timeout: float, fault: str = "") -> dict[str, Any]:
    """`python -m rollcli ARGS` in a session of its own; its process group SIGKILLed when it
    ends or times out. Exit code, seconds and the stderr's tail."""
    env = {**os.environ, "ROLL_INJECT_FAULT": fault, "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
    env["COLUMNS"] = "160"
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rollcli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        out, code = "", "timeout"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    if code == "timeout":
        out, _ = proc.communicate()
    return {"exit": code, "seconds": time.perf_counter() - start, "output_tail": out[-1500:]}


def run_facts(run: Path) -> dict[str, Any]:
    """What the run folder says: trained steps and their `time/*` phases, checkpoints, each
    role's peak beside the plan, the tail of events.log."""
    steps: dict[int, dict[str, float]] = {}
    metrics = run / "metrics.jsonl"
    for line in metrics.read_text().splitlines() if metrics.is_file() else []:
        row = json.loads(line)
        if "actor/grad_norm" in row:  # a training step (validation rows carry no update)
            steps[row["step"]] = {k: v for k, v in row.items() if k.startswith("time/")}
    memory: dict[str, Any] = {}
    if (run / "memory.json").is_file():
        data = json.loads((run / "memory.json").read_text())
        for role, row in data.get("roles", {}).items():
            planned, measured = row.get("planned_bytes"), row.get("measured_bytes")
            memory[role] = {
                "planned_gib": planned / GIB if planned else None,
                "measured_gib": measured / GIB if measured is not None else None,
                "measured_over_plan": measured / planned if planned and measured else None,
                "at_step": row.get("at_step"),
            }
        memory = {"measure": data.get("measure"), "roles": memory}
    events = run / "events.log"
    checkpoints = run / "checkpoints"
    return {
        "steps": sorted(steps),
        "phases_s": {str(s): steps[s] for s in sorted(steps)},
        "checkpoints": sorted(p.name for p in checkpoints.iterdir())
        if checkpoints.is_dir()
        else [],
        "memory": memory,
        "events_tail": events.read_text().splitlines()[-25:] if events.is_file() else [],
    }


def train_cli_case(
    folder: Path, model: str, device: str, work: Path, deadline: float, append: Callable
) -> None:
    """The three parts for `model` (its shape folder `folder`), rows through `append`;
    `work`: the runs' folder (emptied first); `deadline` (`time.time()`): when every process
    it started must be gone (the kit's parent stops this one then). A failed part ends the
    case."""
    import shutil

    def left() -> float:
        return max(10.0, deadline - time.time())

    base = {"model": model, "case": "train-cli"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RAY_CHECK], capture_output=True, text=True, timeout=left()
    )
    row = {**base, "part": "ray", "seconds": time.perf_counter() - start}
    if done.returncode:
        append({**row, "error": f"Ray did not start: {done.stderr[-1500:]}"})
        return
    version, where, init_s = done.stdout.split()[-3:]
    append({**row, "ray": version, "ray_file": where, "init_s": float(init_s)})

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    run = work / RUN_ID
    gpus = "1" if device == "cuda" else "0"
    args = ["train", "rlvr-math", "--model", str(folder), "--gpus", gpus, "--steps", str(KILL_AT)]
    args += ["--save-every", str(KILL_AT - 1), "--runs-dir", str(work), "--run-id", RUN_ID]
    got = roll([*args, *overrides(device)], work, left(), fault=f"kill@generate:{KILL_AT}")
    facts = run_facts(run)
    row = {**base, "part": "train", **got, **facts, "killed": got["exit"] == -signal.SIGKILL}
    wanted = list(range(1, KILL_AT))
    if not (
        row["killed"] and facts["steps"] == wanted and f"step-{KILL_AT - 1}" in facts["checkpoints"]
    ):
        row["error"] = f"wanted steps {wanted}, step-{KILL_AT - 1} and a SIGKILL (exit -9)"
    append(row)
    if "error" in row:
        return
    time.sleep(2)  # the killed workers' device memory returns to the driver

    got = roll(["resume", RUN_ID, "--runs-dir", str(work)], work, left())
    facts = run_facts(run)
    row = {**base, "part": "resume", **got, **facts}
    if got["exit"] != 0 or facts["steps"] != [*wanted, KILL_AT]:
        row["error"] = f"wanted exit 0 and steps 1..{KILL_AT} after the resume"
    append(row)


def table_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The markdown table of docs/gpu.md: a line per part, each role's peak over the plan.

    >>> table_lines([{"model": "m", "part": "resume", "exit": 0, "seconds": 9.5,
    ...   "steps": [1, 2, 3, 4], "checkpoints": ["step-3", "step-4"],
    ...   "memory": {"roles": {"actor_train": {"measured_gib": 1.1, "planned_gib": 1.0,
    ...   "measured_over_plan": 1.1}}}}])[-1]
    '| m | resume | 0 | 9.5 | 1-4 | step-3, step-4 | actor_train 1.10/1.00 GiB (1.10) |'
    """
    lines = [
        "| model | part | exit | s | steps | checkpoints | peak / plan per role |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if r.get("part") == "ray":
            cells = ["-", f"{r['seconds']:.1f}", f"Ray {r.get('ray', '?')}", "", ""]
        else:
            steps = r.get("steps") or []
            span = f"{steps[0]}-{steps[-1]}" if steps else "-"
            roles = (r.get("memory") or {}).get("roles", {})
            memory = ", ".join(
                f"{role} {_g(m['measured_gib'])}/{_g(m['planned_gib'])} GiB "
                f"({_g(m['measured_over_plan'])})"
                for role, m in roles.items()
            )
            cells = [str(r.get("exit", "-")), f"{r.get('seconds', 0):.1f}", span]
            cells += [", ".join(r.get("checkpoints") or []), memory]
        if "error" in r:
            cells[-1] = f"failed: {r['error'][:120]}"
        lines.append(f"| {r['model']} | {r.get('part', '-')} | " + " | ".join(cells) + " |")
    return lines


def _g(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"

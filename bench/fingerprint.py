"""Fingerprint of what training computes, to show a refactor changed no number.

Trains fixed-seed runs on tiny-random through the real CLI, 3 steps each with a checkpoint
at the end: rlvr-math (grpo), agentic-frozenlake, rlvr-math-ppo (rlvr-math with the ppo
preset: a critic on GAE returns, KL in the reward), dpo and distill (the recipes' own
seeded reasoning-gym pairs and conversations; the student is tiny-random's first layer).
`--runs NAME,...` trains a subset. Records, per run, the metrics of every step without
`time`, `time/*`, `perf/*` and `*_per_s` (wall time and throughput differ between any two
runs) and the sha256 of every checkpoint file (of every leaf of a `.pt` state: the RNG file
names the worker whose generator moved). Run it before and after a change; `--compare`
prints each difference, leaving out the RNG states that differ between two runs of one
commit (every process's Python and numpy generators; the torch generators of the driver,
reference, reward, env and teacher workers), and exits 1 when there is one; with `--runs`
it compares those runs only. The runs use the recipes' `auto` precisions, which differ by
machine kind (bf16-mixed training where the CPU computes bf16 natively, fp32 elsewhere:
planning/auto_precision.py), so compare two fingerprints taken on the same kind of CPU.
Each run takes 1-6 minutes on 2 cores that run other jobs (more when they are swamped).

    .venv/bin/python bench/fingerprint.py --out /tmp/before.json          # on the old commit
    .venv/bin/python bench/fingerprint.py --compare /tmp/before.json      # on the new one
    .venv/bin/python bench/fingerprint.py --runs dpo,distill --compare /tmp/before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

AGENTIC_SMALL = [
    "agentic.group_size=2",
    "agentic.groups_per_step=2",
    "agentic.val_episodes=2",
    "agentic.max_turns=2",
    "agentic.num_env_workers=2",
    "rollout.max_new_tokens=4",
    "train.micro_batch_size=2",
    "agentic.keep_top_groups=1.0",
]
OFFLINE_SMALL = ["data.train_size=40", "data.val_size=4", "train.micro_batch_size=2"]
# name -> (recipe, overrides); the name is the run id and the fingerprint's key
RUNS: dict[str, tuple[str, list[str]]] = {
    "rlvr-math": ("rlvr-math", ["rollout.batch_size=8", "rollout.group_size=8", "data.val_size=8"]),
    "agentic-frozenlake": ("agentic-frozenlake", AGENTIC_SMALL),
    # the ppo preset: a critic trained on GAE returns, KL in the reward
    "rlvr-math-ppo": (
        "rlvr-math",
        [
            "rollout.batch_size=8",
            "rollout.group_size=4",
            "rollout.max_new_tokens=8",
            "data.val_size=4",
            "algorithm.name=ppo",
        ],
    ),
    "dpo": ("dpo", [*OFFLINE_SMALL, "dpo.batch_size=4", "dpo.max_response_tokens=16"]),
    # the student: tiny-random's first layer of two (`distill.student_layers` by default)
    "distill": (
        "distill",
        [
            *OFFLINE_SMALL,
            "distill.batch_size=4",
            "distill.top_k=8",
            "distill.sft_weight=0.2",
            "rollout.max_new_tokens=4",
        ],
    ),
}
# Ray gives its raylet 30 s to register, which a machine running other jobs can miss; the
# run is then tried again from scratch (nothing was trained)
RAY_START_FAILED = "timed out during startup"
VOLATILE = ("time/", "perf/")  # and `time` itself, and throughputs (`*_per_s`)
# rng.pt leaves that differ between two runs of one commit (380f730 against itself; the
# ppo, dpo and distill runs at 717afef against themselves): every process's Python and numpy
# generators, and the torch generators of the processes the run does not seed (driver,
# reference, reward, env, distill's teacher); the trained and sampling roles' torch
# generators (actor_train also as dpo's policy and distill's student, the critic) are
# seeded and compared
SEEDED = re.compile(r"rng\.pt:/(actor_train|actor_infer|critic)/\d+/torch$")


def _train(name: str, runs_dir: Path) -> Path:
    recipe, overrides = RUNS[name]
    command = [
        sys.executable, "-m", "rollcli", "train", recipe, "--model", "tiny-random",
        "--steps", "3", "--eval-every", "3", "--runs-dir", str(runs_dir), "--run-id", name,
        *overrides,
    ]  # fmt: skip
    env = {**os.environ, "COLUMNS": "100", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
    start = time.monotonic()
    for _ in range(3):
        done = subprocess.run(command, env=env, cwd=runs_dir, capture_output=True, text=True)
        if done.returncode == 0 or RAY_START_FAILED not in done.stderr:
            break
        print(f"{name}: Ray did not start (a busy machine), again", file=sys.stderr)
        shutil.rmtree(runs_dir / name, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    print(f"{name}: trained in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return runs_dir / name


def _run_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in RUNS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown run {unknown}: choose from {','.join(RUNS)}")
    return names


def _volatile(key: str) -> bool:
    return key == "time" or key.startswith(VOLATILE) or key.endswith("_per_s")


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, bytes]]:
    """Every leaf of a saved state (nested dicts, lists, tensors, numbers) with its path."""
    if isinstance(value, dict):
        for k in sorted(value, key=str):
            yield from _leaves(value[k], f"{path}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}/{i}")
    elif isinstance(value, torch.Tensor):
        yield path, value.cpu().contiguous().numpy().tobytes()
    else:
        yield path, repr(value).encode()


def _state_hashes(path: Path, name: str) -> dict[str, str]:
    """A `.pt` state per leaf (the RNG file holds every worker's generators: a leaf that
    differs names the worker), the rest per file."""
    if path.suffix != ".pt":
        return {name: hashlib.sha256(path.read_bytes()).hexdigest()}
    state = torch.load(path, map_location="cpu", weights_only=False)
    return {f"{name}:{leaf}": hashlib.sha256(data).hexdigest() for leaf, data in _leaves(state)}


def _fingerprint(run: Path) -> dict:
    steps = []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        steps.append({k: v for k, v in sorted(row.items()) if not _volatile(k)})
    files: dict[str, str] = {}
    for path in sorted((run / "checkpoints").rglob("*")):
        if path.is_file() and path.suffix in {".safetensors", ".pt", ".bin"}:
            files |= _state_hashes(path, str(path.relative_to(run / "checkpoints")))
    return {"metrics": steps, "checkpoint_sha256": files}


def _differences(before: dict, after: dict) -> list[str]:
    found = []
    for recipe in sorted(before.keys() | after.keys()):
        old, new = before.get(recipe), after.get(recipe)
        if old is None or new is None:
            found.append(f"{recipe}: only in {'after' if old is None else 'before'}")
            continue
        for i, (a, b) in enumerate(zip(old["metrics"], new["metrics"], strict=False)):
            for key in sorted(a.keys() | b.keys()):
                if a.get(key) != b.get(key):
                    found.append(f"{recipe} row {i} {key}: {a.get(key)} -> {b.get(key)}")
        if len(old["metrics"]) != len(new["metrics"]):
            found.append(f"{recipe}: {len(old['metrics'])} -> {len(new['metrics'])} rows")
        for name in sorted(old["checkpoint_sha256"].keys() | new["checkpoint_sha256"].keys()):
            if "rng.pt:" in name and not SEEDED.search(name):
                continue
            a, b = old["checkpoint_sha256"].get(name), new["checkpoint_sha256"].get(name)
            if a != b:
                found.append(f"{recipe} checkpoint {name}: {str(a)[:12]} -> {str(b)[:12]}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the fingerprint here")
    parser.add_argument("--compare", type=Path, help="a fingerprint to compare this one to")
    parser.add_argument(
        "--runs", type=_run_names, default=list(RUNS), metavar="NAME,...",
        help=f"the runs to train (default all: {','.join(RUNS)}); --compare then checks these",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="roll-fingerprint-") as tmp:
        result = {name: _fingerprint(_train(name, Path(tmp))) for name in args.runs}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result["_commit"] = commit.stdout.strip()
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name in args.runs:
        print(f"{name}: {len(result[name]['metrics'])} metric rows, "
              f"{len(result[name]['checkpoint_sha256'])} checkpoint files")  # fmt: skip
    if args.compare:
        before = json.loads(args.compare.read_text())
        before.pop("_commit", None)
        before = {name: run for name, run in before.items() if name in args.runs}
        result.pop("_commit")
        found = _differences(before, result)
        print("\n".join(found) or "identical: every metric and checkpoint file")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()

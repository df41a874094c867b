"""What routing replay changes on a real MoE, and what the MoE costs: rlvr-math-moe (the
embedded model upcycled to 4 experts, top-2) through the real CLI with replay off and R3,
under the fp32 sampler and the bf16 one (where the CPU computes bf16 natively), beside
rlvr-math (the dense model) at the same settings (the trainer in the recipes' precision,
micro-batches of 8 rows), in one run on one machine.

    .venv/bin/python bench/moe_routing.py                 # 6 steps an arm
    .venv/bin/python bench/moe_routing.py --steps 3 --arms dense,moe-R3-bf16

Each arm trains `--steps` steps of the recipe's own batch (40 samples, 32 new tokens) with
validation at the start and end on 16 problems only; the runs go under `--runs-dir`. It
prints, per arm and step, the share of token x layer top-k sets where the trainer's router
picks the sampler's (`moe/routing_agreement`), the mean |trainer - sampler| log-prob of the
sampled tokens as run (`moe/logprob_mismatch`) and, with R3, without replay on a slice
(`moe/logprob_mismatch_unreplayed`); then each arm's mean step time over its steps after the
first, its phases, each role's measured peak memory against the plan's, and on the last line
the ratio `moe / dense step time (...): R.RRx` of the R3 arm to the dense one at the same
sampler precision.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAME = ["train.micro_batch_size=8"]  # rlvr-math-moe's; the dense arms take it too
BF16, FP32 = ["rollout.precision=bf16"], ["rollout.precision=fp32"]
ARMS = {  # name: (recipe, overrides)
    "dense-bf16": ("rlvr-math", [*SAME, *BF16]),
    "moe-R3-bf16": ("rlvr-math-moe", [*SAME, *BF16, "algorithm.router_replay=R3"]),
    "moe-off-bf16": ("rlvr-math-moe", [*SAME, *BF16, "algorithm.router_replay=off"]),
    "dense-fp32": ("rlvr-math", [*SAME, *FP32]),
    "moe-R3-fp32": ("rlvr-math-moe", [*SAME, *FP32, "algorithm.router_replay=R3"]),
    "moe-off-fp32": ("rlvr-math-moe", [*SAME, *FP32, "algorithm.router_replay=off"]),
}
PHASES = ("time/generate_s", "time/forward_s", "time/train_s", "time/weight_sync_s")
MiB = 2**20


def native_bf16() -> bool:
    """Whether this CPU has bf16 instructions (AVX-512 BF16 or AMX)."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


def run_arm(name: str, steps: int, runs: Path) -> Path:
    recipe, sets = ARMS[name]
    run = runs / name
    if (run / "status.json").exists():
        status = json.loads((run / "status.json").read_text()).get("status")
        if status == "finished":
            return run
    cmd = [
        sys.executable, "-m", "rollcli", "train", recipe, "--steps", str(steps),
        "--runs-dir", str(runs), "--run-id", name, "--eval-every", "0",
        "data.val_size=16", *sets,
    ]  # fmt: skip
    if run.exists():
        cmd += ["--resume", "auto"]
    print(f"{name}: {' '.join(cmd[3:])}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    done = subprocess.run(
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return run


def steps_of(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("step", 0) > 0 and "time/step_s" in r]


def fmt(value: float | None, spec: str = ".2e") -> str:
    return "-" if value is None else format(value, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--arms", default=None, help="comma-separated, of " + ", ".join(ARMS))
    ap.add_argument("--runs-dir", type=Path, default=Path("/tmp/roll-moe-routing"))
    args = ap.parse_args()
    bf16 = native_bf16()
    default = ["dense-bf16", "moe-R3-bf16", "moe-off-bf16"] if bf16 else []
    default += ["dense-fp32", "moe-R3-fp32", "moe-off-fp32"]
    names = args.arms.split(",") if args.arms else default
    args.runs_dir.mkdir(parents=True, exist_ok=True)
    runs = {name: run_arm(name, args.steps, args.runs_dir) for name in names}

    print("\nper step: routing agreement | log-prob mismatch | without replay (slice)")
    print(f"{'arm':<14} {'step':>4} {'agreement':>10} {'mismatch':>10} {'unreplayed':>11}")
    for name, run in runs.items():
        if not name.startswith("moe"):
            continue
        for r in steps_of(run):
            print(
                f"{name:<14} {r['step']:>4} {fmt(r.get('moe/routing_agreement'), '.3f'):>10} "
                f"{fmt(r.get('moe/logprob_mismatch')):>10} "
                f"{fmt(r.get('moe/logprob_mismatch_unreplayed')):>11}"
            )

    print("\nstep time (mean over steps 2+, s) and phases")
    print(f"{'arm':<14} {'step':>6} " + " ".join(f"{p.split('/')[1][:-2]:>12}" for p in PHASES))
    means = {}
    for name, run in runs.items():
        rows = steps_of(run)[1:] or steps_of(run)
        means[name] = sum(r["time/step_s"] for r in rows) / len(rows)
        phases = [sum(r.get(p, 0.0) for r in rows) / len(rows) for p in PHASES]
        print(f"{name:<14} {means[name]:>6.1f} " + " ".join(f"{p:>12.1f}" for p in phases))

    print("\npeak memory per role (MiB): measured / planned")
    for name, run in runs.items():
        roles = json.loads((run / "memory.json").read_text())["roles"]
        cells = [
            f"{role} {v['measured_bytes'] / MiB:.0f}/{v['planned_bytes'] / MiB:.0f}"
            for role, v in roles.items()
            if v.get("planned_bytes")
        ]
        print(f"{name:<14} " + ", ".join(cells))

    pairs = [("dense-bf16", "moe-R3-bf16"), ("dense-fp32", "moe-R3-fp32")]
    pair = next((p for p in pairs if all(name in means for name in p)), None)
    if pair is not None:
        print(
            f"moe / dense step time ({pair[1]} / {pair[0]}): {means[pair[1]] / means[pair[0]]:.2f}x"
        )


if __name__ == "__main__":
    main()

"""LoRA vs full fine-tuning on the same RLVR run: `rlvr-math` against `rlvr-math-lora`.

    .venv/bin/python bench/lora_vs_full.py                     # smollm2-135m, 10 steps each
    .venv/bin/python bench/lora_vs_full.py --model tiny-random --steps 2   # quick check

Both recipes are the same GRPO run (same seed, prompts, samples, reward, validation set);
rlvr-math trains every weight with a reference worker for the KL, rlvr-math-lora trains
rank-16 adapters on every linear layer and takes the reference as the policy with its
adapters off (no reference worker). They run one after the other, each as a whole
`roll train` process (start-up, baseline validation, the steps, the last validation).

Reported per recipe: wall time of the process, median step time (`time/step_s` less the
step's validation), median train phase (`time/train_s`), the peak PSS of the process tree
(the driver, Ray's daemons and every worker; shared pages counted once; sampled every
`--sample-s` s), trainable parameters (events.log), and the held-out greedy accuracy before
training and after the last step with its 95% Wilson interval. The last line gives the
ratios LoRA / full.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from grpo_step import GIB, Side, read_jsonl, run_measured
from rich.console import Console
from rich.table import Table

RECIPES = ("rlvr-math", "rlvr-math-lora")


def run_recipe(args: argparse.Namespace, recipe: str, work: Path) -> dict:
    side = Side(recipe)
    cmd = [
        sys.executable,
        *("-m", "rollcli", "train", recipe, "--model", args.model, "--steps", str(args.steps)),
        *("--runs-dir", str(work), "--run-id", recipe, *args.overrides),
    ]
    t0 = time.perf_counter()
    run_measured(cmd, work / f"{recipe}.log", side, args.sample_s, None)
    wall = time.perf_counter() - t0
    rows = read_jsonl(work / recipe / "metrics.jsonl")
    vals = [r for r in rows if "val/accuracy" in r]
    steps = [r for r in rows if "time/step_s" in r]
    trainable = "all"
    for line in (work / recipe / "events.log").read_text().splitlines():
        if "parameters train" in line:  # LoRA: "... N of M parameters train"
            trainable = line.split(": ")[-1].split(" parameters")[0].split(" of ")[0]
    return {
        "side": side,
        "wall_s": wall,
        "step_s": statistics.median(r["time/step_s"] - r.get("time/validate_s", 0.0) for r in steps)
        if steps
        else float("nan"),
        "train_s": statistics.median(r["time/train_s"] for r in steps) if steps else float("nan"),
        "first": vals[0] if vals else {},
        "last": vals[-1] if len(vals) > 1 else {},
        "trainable": trainable,
    }


def _acc(row: dict) -> str:
    if not row:
        return "-"
    low, high = row.get("val/accuracy_ci_low"), row.get("val/accuracy_ci_high")
    ci = f" [{low:.3f}, {high:.3f}]" if low is not None else ""
    return f"{row['val/accuracy']:.3f}{ci}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--sample-s", type=float, default=0.5, help="memory sampling period")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder")
    parser.add_argument("overrides", nargs="*", help="recipe overrides for both runs")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="lora-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {recipe: run_recipe(args, recipe, work) for recipe in RECIPES}

    table = Table(title=f"LoRA vs full, {args.model}, {args.steps} steps (runs in {work})")
    for col in ("recipe", "wall s", "step s", "train s", "peak PSS GiB", "val acc step 0"):
        table.add_column(col)
    table.add_column(f"val acc step {args.steps}")
    table.add_column("trainable")
    for recipe, res in results.items():
        table.add_row(
            recipe,
            f"{res['wall_s']:.0f}",
            f"{res['step_s']:.1f}",
            f"{res['train_s']:.1f}",
            f"{res['side'].peak_pss / GIB:.2f}",
            _acc(res["first"]),
            _acc(res["last"]),
            res["trainable"],
        )
    Console(width=160).print(table)
    full, lora = (results[r] for r in RECIPES)
    failed = [r for r, res in results.items() if res["side"].failed]
    if failed:
        print(f"failed: {', '.join(failed)} (see the logs in {work})")
        sys.exit(1)
    print(
        f"LoRA / full: peak PSS {lora['side'].peak_pss / full['side'].peak_pss:.2f}x, step time "
        f"{lora['step_s'] / full['step_s']:.2f}x, train phase "
        f"{lora['train_s'] / full['train_s']:.2f}x, held-out accuracy after {args.steps} steps "
        f"{_acc(lora['last'])} vs {_acc(full['last'])}"
    )


if __name__ == "__main__":
    main()

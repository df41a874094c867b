"""Compare algorithm presets on rlvr-math for the same wall-time budget.

    .venv/bin/python bench/compare_algorithms.py --minutes 6 grpo rloo reinforce_pp dapo

Each preset trains the recipe (default rlvr-math on smollm2-135m) through the real CLI
with `run.time_limit_min`, then the table shows held-out accuracy before and after, the
steps the budget allowed, and the wall time. Runs go to runs/bench-<preset>-<time>/.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def run_preset(recipe: str, preset: str, minutes: float, runs_dir: Path, extra: list[str]) -> dict:
    run_id = f"bench-{preset}-{time.strftime('%H%M%S')}"
    start = time.perf_counter()
    cmd = [
        sys.executable,
        "-m",
        "rollcli",
        "train",
        recipe,
        "--runs-dir",
        str(runs_dir),
        "--run-id",
        run_id,
        "--steps",
        "1000",
        f"algorithm.name={preset}",
        f"run.time_limit_min={minutes}",
        *extra,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"preset": preset, "error": proc.stderr.strip().splitlines()[-1:]}
    rows = [
        json.loads(line) for line in (runs_dir / run_id / "metrics.jsonl").read_text().splitlines()
    ]
    vals = [r for r in rows if "val/accuracy" in r]
    return {
        "preset": preset,
        "run_id": run_id,
        "steps": rows[-1]["step"],
        "wall_min": wall / 60,
        "val_start": vals[0]["val/accuracy"],
        "val_end": vals[-1]["val/accuracy"],
        "reward_last": next(
            (r["reward/mean"] for r in reversed(rows) if "reward/mean" in r), float("nan")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("presets", nargs="*", default=["grpo", "rloo", "reinforce_pp", "dapo"])
    parser.add_argument("--recipe", default="rlvr-math")
    parser.add_argument("--minutes", type=float, default=6.0, help="training budget per preset")
    parser.add_argument("--runs-dir", type=Path, default=Path("runs"))
    parser.add_argument(
        "overrides", nargs=argparse.REMAINDER, help="after --: key=value overrides for every run"
    )
    args = parser.parse_args()
    extra = [o for o in args.overrides if o != "--"]
    results = []
    for preset in args.presets:
        print(
            f"training {args.recipe} with {preset} for {args.minutes:g} min ...",
            file=sys.stderr,
            flush=True,
        )
        results.append(run_preset(args.recipe, preset, args.minutes, args.runs_dir, extra))
    table = Table(
        title=f"{args.recipe}: {args.minutes:g} min of training per preset (held-out accuracy, greedy)"
    )
    for col in (
        "preset",
        "steps",
        "val acc before",
        "val acc after",
        "last reward",
        "wall (min)",
        "run",
    ):
        table.add_column(col, no_wrap=col in ("preset", "run"))
    for r in results:
        if "error" in r:
            table.add_row(r["preset"], "-", "-", "-", "-", "-", f"failed: {r['error']}")
            continue
        table.add_row(
            r["preset"],
            str(r["steps"]),
            f"{r['val_start']:.3f}",
            f"{r['val_end']:.3f}",
            f"{r['reward_last']:.3f}",
            f"{r['wall_min']:.1f}",
            r["run_id"],
        )
    Console().print(table)


if __name__ == "__main__":
    main()

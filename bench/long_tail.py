"""Long-tailed replies: sync rollouts against continuous batching, async and partial rollouts.

    .venv/bin/python bench/long_tail.py                       # the table in docs/performance.md
    .venv/bin/python bench/long_tail.py --measured 2 --rounds 1 --max-new-tokens 64  # a check

The embedded model on rlvr-math's prompts, asked to show its working, `max_new_tokens` 256:
most replies end early and a few run to the limit. Four arms, each a real `roll train` run
(subprocess) of the same seed and settings but for:

    sync            every step generates its samples, then trains
    sync+cb         + rollout.continuous_batching (rows refilled as samples end)
    async           rollout.max_staleness=1 (the next step's rollout runs while one trains)
    async+partial   rollout.partial, max_staleness=2 (a step takes the groups that ended;
                    the rest continue, one step ahead)

An arm's first `max_staleness + 1` steps are not measured (the pipeline fills), nor its
last step with an async lead (its rollout was started earlier and it starts none, so it
skips the generation the other steps overlap); in between `--measured` steps per round, the arms in alternating order over `--rounds` rounds (A B C D,
then D C B A, ...), each round a fresh run. Per arm: trained samples/s and generated
tokens/s over the measured steps' wall time (from the steps' `time` in metrics.jsonl),
reply lengths (p50 / p90 / max, the arm's own samples), continued samples and the share of
decode rows busy. The last line is exactly `async+partial / sync: R.RRx` (samples/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SUFFIX = "Show your working step by step, then give the final answer."
ARMS: dict[str, list[str]] = {
    "sync": [],
    "sync+cb": ["rollout.continuous_batching=true"],
    "async": ["rollout.max_staleness=1", "algorithm.off_policy.correction=tis"],
    "async+partial": [
        "rollout.max_staleness=2",
        "rollout.partial=true",
        "algorithm.off_policy.correction=tis",
    ],
}
LEAD = {"sync": 0, "sync+cb": 0, "async": 1, "async+partial": 2}  # max_staleness
# steps whose rollouts started earlier and that start none (the run's end): not measured,
# since they skip the generation every other step overlaps
DRAIN = {"sync": 0, "sync+cb": 0, "async": 1, "async+partial": 1}


def run_arm(arm: str, args: argparse.Namespace, runs: Path, round_: int) -> dict:
    steps = LEAD[arm] + 1 + args.measured + DRAIN[arm]
    run_id = f"{arm.replace('+', '-')}-r{round_}"
    cmd = [
        sys.executable,
        "-m",
        "rollcli",
        "train",
        "rlvr-math",
        "--runs-dir",
        str(runs),
        "--run-id",
        run_id,
        "--steps",
        str(steps),
        "--eval-every",
        "0",
        "--save-every",
        "0",
        f"data.prompt_suffix={SUFFIX}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"rollout.batch_size={args.batch}",
        f"rollout.group_size={args.group}",
        "data.val_size=2",  # validation is not what this measures
        "rollout.val_max_new_tokens=8",
        *ARMS[arm],
    ]
    env = {**os.environ, "COLUMNS": "100"}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"{arm}: roll train failed ({done.returncode}):\n{done.stderr[-3000:]}")
    run = runs / run_id
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    by_step = {r["step"]: r for r in rows if "step" in r}
    first = LEAD[arm] + 2  # the first measured step
    last = first + args.measured - 1
    measured = [by_step[s] for s in range(first, last + 1)]
    samples = tokens = 0
    for r in measured:
        path = run / "samples" / f"step-{r['step']}.jsonl"
        lengths = [json.loads(x)["response_tokens"] for x in path.open() if x.strip()]
        samples += len(lengths)
        tokens += sum(lengths)
    return {
        "arm": arm,
        # wall clock from the end of the step before the first measured one to the end of
        # the last measured one
        "wall": by_step[last]["time"] - by_step[first - 1]["time"],
        "samples": samples,
        "tokens": tokens,
        "continued": sum(r.get("rollout/partial_continued", 0) for r in measured),
        "busy": [r["rollout/rows_busy"] for r in measured if "rollout/rows_busy" in r],
        "lengths": [r["response_length/mean"] for r in measured],
        "maxlen": max(r["response_length/max"] for r in measured),
        "run_s": time.perf_counter() - t0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measured", type=int, default=3, help="measured steps per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args()
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="long-tail-"))
    order = list(ARMS)
    results: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    start = time.perf_counter()
    for round_ in range(args.rounds):
        for arm in order if round_ % 2 == 0 else order[::-1]:
            res = run_arm(arm, args, runs, round_)
            results[arm].append(res)
            print(
                f"round {round_ + 1} {arm}: {res['samples']} samples in {res['wall']:.0f} s "
                f"(run {res['run_s']:.0f} s)",
                flush=True,
            )
    print(f"\nrunfolders: {runs}; bench wall time {(time.perf_counter() - start) / 60:.1f} min")
    print_table(results, runs)


def print_table(results: dict[str, list[dict]], runs: Path) -> None:
    lengths = reply_lengths(runs, "sync")
    if lengths:
        q = statistics.quantiles(lengths, n=10)
        print(
            f"sync reply lengths (tokens): p50 {statistics.median(lengths):.0f}, "
            f"p90 {q[8]:.0f}, max {max(lengths)} over {len(lengths)} samples"
        )
    header = "| arm | measured steps | samples | wall s | samples/s | tokens/s | continued |"
    print(header + " rows busy | x sync |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rate = {}
    for arm, parts in results.items():
        wall = sum(p["wall"] for p in parts)
        samples = sum(p["samples"] for p in parts)
        tokens = sum(p["tokens"] for p in parts)
        busy = [b for p in parts for b in p["busy"]]
        rate[arm] = samples / wall
        steps = sum(len(p["lengths"]) for p in parts)
        print(
            f"| {arm} | {steps} | {samples} | {wall:.0f} | {samples / wall:.3f} | "
            f"{tokens / wall:.1f} | {sum(p['continued'] for p in parts):.0f} | "
            f"{statistics.mean(busy) if busy else float('nan'):.2f} | "
            f"{rate[arm] / rate['sync']:.2f} |"
        )
    print(f"async+partial / sync: {rate['async+partial'] / rate['sync']:.2f}x")


def reply_lengths(runs: Path, arm: str) -> list[int]:
    """The arm's reply lengths in tokens, from its samples (every round, every step)."""
    out = []
    for run in sorted(runs.glob(f"{arm}-r*")):
        for path in sorted((run / "samples").glob("step-*.jsonl")):
            out += [json.loads(x)["response_tokens"] for x in path.open() if x.strip()]
    return out


if __name__ == "__main__":
    main()

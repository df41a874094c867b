"""Whether this CPU computes bf16 faster than fp32 at a model's own shapes: the probe behind
`train.precision: auto` on a CPU (planning/auto_precision.py).

CPUs differ: an AVX-512 BF16 (or AMX) core multiplies bf16 matrices in hardware, measured
at 2.0-2.4x its fp32 rate on the shapes of a training step (AMD EPYC, torch 2.13, 2 threads),
while an AVX2-only core converts and runs them slower than fp32. So `bf16_probe` times the
three matmuls a decoder layer's forward is made of at the model's sizes (`[T, H] x [H, I]`,
`[T, I] x [I, H]`, and the LM head `[T, H] x [H, V]`, each size capped at
`PROBE_DIM_CAP`), in fp32 and in bf16, the best
of interleaved repeats (a neighbour's load slows both alike), and keeps the ratio per CPU
model, thread count, torch version and shape in the machine's cache (`$ROLL_CACHE/bf16/`,
planning/machine_facts.py). The measurement runs in a child process (`python -m
rollcli.planning.cpu_bf16`): `roll plan` and `--dry-run` import no torch. About 3 s on a
machine's first plan of a model size, nothing after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from typing import Any

from rollcli.config.errors import ConfigError
from rollcli.planning.machine_facts import cached_measurement, cpu_flags, cpu_model

PROBE_TOKENS = 256  # rows of each probed matmul: a micro-batch's tokens are ~100s to 1000s
# each probed size at most this: a 7B model's [3584, 18944] took 10 s to probe, and past
# ~2k a matmul's rate per FLOP hardly changes (nor does the LM head's with the vocabulary)
PROBE_DIM_CAP = 2048
REPEATS = 5
# the speed-up below which bf16 is not worth its rounding: fp32 stays
BF16_MIN_SPEEDUP = 1.3
# the flags of CPUs that compute bf16 matmuls in hardware (named in the plan's line)
BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def bf16_probe(hidden: int, intermediate: int, vocab: int) -> dict[str, Any]:
    """`{"speedup", "fp32_s", "bf16_s", "cached", "cache_file", ...}` of this CPU at these
    sizes: fp32's time over bf16's for the probed matmuls, cached per machine."""
    h, i, v = (min(d, PROBE_DIM_CAP) for d in (hidden, intermediate, vocab))
    shapes = [[h, i], [i, h], [h, v]]
    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    key = {
        "cpu": cpu_model(),
        "threads": threads,
        "torch": version("torch"),
        "shapes": shapes,
        "tokens": PROBE_TOKENS,
    }
    return cached_measurement("bf16", key, lambda: _measure_in_child(shapes, threads or 1))


def _measure_in_child(shapes: list[list[int]], threads: int) -> dict[str, float]:
    args = json.dumps({"shapes": shapes, "threads": threads})
    done = subprocess.run(
        [sys.executable, "-m", "rollcli.planning.cpu_bf16", args],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(
            f"train.precision auto: the bf16 probe of this CPU failed ({last}); "
            "set train.precision: fp32 or bf16-mixed"
        )
    speeds: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return speeds


def measure(shapes: list[list[int]], threads: int) -> dict[str, float]:
    """fp32's and bf16's best time over the probed matmuls, and their ratio (imports torch)."""
    import torch

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    pairs = {
        dtype: [
            (
                torch.randn(PROBE_TOKENS, k, generator=gen).to(dtype),
                torch.randn(n, k, generator=gen).to(dtype),
            )
            for k, n in shapes
        ]
        for dtype in (torch.float32, torch.bfloat16)
    }
    best = {dtype: float("inf") for dtype in pairs}
    for _ in range(REPEATS + 1):  # the first round warms up
        for dtype, mats in pairs.items():
            start = time.perf_counter()
            for x, w in mats:
                torch.nn.functional.linear(x, w)
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    fp32, bf16 = best[torch.float32], best[torch.bfloat16]
    return {"speedup": fp32 / bf16, "fp32_s": fp32, "bf16_s": bf16}


def bf16_flags() -> list[str]:
    """Which of `BF16_FLAGS` this CPU has."""
    flags = cpu_flags()
    return [flag for flag in BF16_FLAGS if flag in flags]


if __name__ == "__main__":  # the child of `_measure_in_child`
    request = json.loads(sys.argv[1])
    print(json.dumps(measure(request["shapes"], request["threads"])))

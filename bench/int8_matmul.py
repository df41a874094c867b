"""Which low-precision matmul is fastest on this CPU, at the shapes of a rollout's decode step.

The linears of SmolLM2-135M (q/o, k/v, MLP up/gate and down, the vocabulary head) at a decode
batch of 64 and of 1, timed side by side in one process with the run's threads:

- fp32 and bf16 `nn.Linear`;
- `int8 dynamic`: `torch.ao.quantization.quantize_dynamic` (per-row int8 weights, activations
  quantized per call; fbgemm's kernels; torch marks `torch.ao.quantization` deprecated);
- `w8 pack_mm`: `aten._weight_int8pack_mm` (int8 weights, fp32 activations);
- `_int_mm`: `torch._int_mm`, int8 x int8 -> int32 alone (no quantizing of the activations
  nor scaling of the result: an upper bound of what an int8 GEMM path can reach).

    python bench/int8_matmul.py [--reps 20]

Prints ms per matmul (GFLOP/s); the last line is the ratio of the best int8 path over fp32
over the batch-64 shapes, summed (issue #41: the rollout's int8 choice).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable

import torch

SHAPES = [(576, 576), (576, 192), (576, 1536), (1536, 576), (576, 49152)]  # (in, out)
PATHS = ("fp32", "bf16", "int8 dynamic", "w8 pack_mm", "_int_mm")


def timed(fn: Callable[[], object], reps: int) -> float:
    for _ in range(3):
        fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def candidates(rows: int, k: int, n: int) -> dict[str, Callable[[], object]]:
    x = torch.randn(rows, k)
    linear = torch.nn.Linear(k, n, bias=False)
    w = linear.weight.detach()
    half = torch.nn.Linear(k, n, bias=False).bfloat16()
    xb = x.bfloat16()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation
        dynamic = torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.qint8
        )
    scale = w.abs().amax(1) / 127
    wq = torch.round(w / scale[:, None]).to(torch.int8)
    xq = torch.randint(-127, 127, (max(rows, 17), k), dtype=torch.int8)  # _int_mm: rows > 16
    wt = torch.randint(-127, 127, (k, n), dtype=torch.int8)
    return {
        "fp32": lambda: linear(x),
        "bf16": lambda: half(xb),
        "int8 dynamic": lambda: dynamic(x),
        "w8 pack_mm": lambda: torch.ops.aten._weight_int8pack_mm(x, wq, scale),
        "_int_mm": lambda: torch._int_mm(xq, wt),
    }


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--batches", default="64,1")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} threads")  # fmt: skip
    totals: dict[str, float] = dict.fromkeys(PATHS, 0.0)
    first = int(args.batches.split(",")[0])
    with torch.no_grad():
        for rows in (int(b) for b in args.batches.split(",")):
            print(f"\nbatch {rows}: ms per matmul (GFLOP/s)")
            print(f"| in x out | {' | '.join(PATHS)} |")
            print("|" + " --- |" * (len(PATHS) + 1))
            for k, n in SHAPES:
                flops = 2 * rows * k * n
                cells = []
                for name, fn in candidates(rows, k, n).items():
                    seconds = timed(fn, args.reps)
                    if rows == first:
                        totals[name] += seconds
                    cells.append(f"{seconds * 1e3:.3f} ({flops / seconds / 1e9:.0f})")
                print(f"| {k} x {n} | {' | '.join(cells)} |")
    int8 = min(totals[p] for p in ("int8 dynamic", "w8 pack_mm"))
    ratio = totals["fp32"] / int8
    print(f"\nbatch {first}, all shapes: fp32 {totals['fp32'] * 1e3:.1f} ms, bf16 "
          f"{totals['bf16'] * 1e3:.1f} ms, best int8 path {int8 * 1e3:.1f} ms")  # fmt: skip
    print(f"ratio fp32 / best int8 (batch {first}): {ratio:.2f}x")
    return ratio


if __name__ == "__main__":
    main()

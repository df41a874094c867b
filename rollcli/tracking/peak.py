"""The machine's matrix-multiply peak: what `perf/*_mfu` divides by.

`matmul_peak` times a square matmul on a device and dtype (best of repeated runs over about
a second, as `bench/rollout.py` has always measured the compute-bound limit). A run measures
it once, in its actor_train worker (the trainer's device and compute dtype: the GPU when the
plan gave it one), and keeps the figure in `perf_peak.json` in the run folder, so a resumed
run divides by the same number. `run.peak_flops` sets it instead (FLOP/s of one device:
a data sheet's figure, or one measured elsewhere).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PEAK_FILE = "perf_peak.json"


def matmul_peak(
    device: Any = "cpu", dtype: Any = None, *, size: int = 1024, seconds: float = 1.0
) -> float:
    """FLOP/s of a `size` x `size` matmul on `device` in `dtype` (default float32), the best
    of repeated runs over `seconds` (and of at least three, for a busy machine)."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    a @ b  # warm up
    sync()
    best, runs, deadline = float("inf"), 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline or runs < 3:
        runs += 1
        start = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def run_peak(
    root: Path, configured: float | None, measure: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """The run's peak: `{"flops": FLOP/s, "source": ..., ...}`. `configured` (run.peak_flops)
    wins; else the figure this run folder already holds; else `measure()` (which returns
    `flops`, `device` and `dtype`), written to the folder."""
    if configured is not None:
        return {"flops": float(configured), "source": "run.peak_flops"}
    path = root / PEAK_FILE
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    peak = {**measure(), "source": "measured"}
    tmp = path.with_name(f".{PEAK_FILE}.tmp")
    tmp.write_text(json.dumps(peak) + "\n", encoding="utf-8")
    tmp.replace(path)
    return peak

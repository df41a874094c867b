"""The machine's matrix-multiply peak: what `perf/*_mfu` divides by.

`matmul_peak` times a square matmul on a device and dtype (the best of repeated runs in
bursts spread over about two seconds, as `bench/rollout.py` has always measured the
compute-bound limit: a neighbour's load only lowers the figure, so the best run is the
truest). A run measures it once, in its actor_train worker (the trainer's device and compute
dtype: the GPU when the plan gave it one), and keeps the figure in `perf_peak.json` in the
run folder, so a resumed run divides by the same number. `run.peak_flops` sets it instead
(FLOP/s of one device: a data sheet's figure, or one measured elsewhere).

`machine_peak` keeps each measurement in the machine's cache (`$ROLL_CACHE/peak/`,
planning/machine_facts.py: one file per device model, dtype, torch thread count and torch version), so the runs of one
machine divide by the same figure and each later run skips the ~2 s probe. Delete the file
to measure again (e.g. after the first probe ran on a busy machine).

A probe on a busy machine still reads low (66.8 against a quiet 178 GFLOP/s on a 2-core
AVX2 CPU), and a phase then seems to beat the peak (an MFU of 119%). The peak is a lower
bound on what the device can do, so a phase that runs faster raises it (`raised_peak`):
the run writes an event and the new figure to `perf_peak.json`, and an MFU never shows
above 100%. `ShownPeak` applies the same rule to rows an older run logged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rollcli.planning.machine_facts import (
    cached_measurement,
    cpu_model,
    replace_json,
    write_cached,
)

PEAK_FILE = "perf_peak.json"


def matmul_peak(
    device: Any = "cpu",
    dtype: Any = None,
    *,
    size: int = 1024,
    seconds: float = 1.0,
    bursts: int = 4,
) -> float:
    """FLOP/s of a `size` x `size` matmul on `device` in `dtype` (default float32): the best
    of repeated runs in `bursts` bursts of `seconds / bursts` each (at least three runs a
    burst), with a pause as long as a burst between them, so that a neighbour's passing
    load does not set the figure."""
    import torch

    dtype = dtype or torch.float32
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    a @ b  # warm up
    sync()
    best = float("inf")
    for burst in range(bursts):
        if burst:
            time.sleep(seconds / bursts)
        runs, deadline = 0, time.perf_counter() + seconds / bursts
        while time.perf_counter() < deadline or runs < 3:
            runs += 1
            start = time.perf_counter()
            a @ b
            sync()
            best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def device_name(device: Any) -> str:
    """The device's model: the GPU's name, or the CPU's (`/proc/cpuinfo`, else `platform`)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def machine_peak(
    device: Any = "cpu", dtype: Any = None, *, seconds: float = 1.0, cache: Path | None = None
) -> dict[str, Any]:
    """`{"flops", "device", "dtype", "measured_at"}` for this machine: the figure cached in
    `cache` (default `$ROLL_CACHE/peak`, planning/machine_facts.py) for this device model,
    dtype, torch thread count and torch version, else `matmul_peak` measured now and cached;
    `"cached"` says which, `"cache_file"` is the file."""
    import torch

    dtype = dtype or torch.float32
    key = {
        "device": device_name(device),
        "dtype": str(dtype).split(".")[-1],
        "threads": torch.get_num_threads() if torch.device(device).type == "cpu" else None,
        "torch": torch.__version__,
    }
    record = cached_measurement(
        "peak", key, lambda: {"flops": matmul_peak(device, dtype, seconds=seconds)}, cache
    )
    return {**record, "device": str(device), "dtype": key["dtype"]}


def raise_machine_peak(cache_file: str, flops: float, why: str) -> None:
    """Raise the machine's cached figure to `flops` (a phase ran that fast: `raised_peak`),
    where `cache_file` is on this node and holds less."""
    path = Path(cache_file)
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
        if float(cached["flops"]) >= flops:
            return
    except (OSError, ValueError, KeyError, TypeError):
        return  # another node's file, or gone: nothing to raise
    write_cached(path, {**cached, "flops": flops, "raised": why})


def raised_peak(peak: float, rates: dict[str, float]) -> tuple[float, str | None]:
    """`(peak, phase)`: the fastest phase's rate (FLOP/s per device) and its name where it
    beats `peak`, else `(peak, None)`: a device that ran that fast can.

    >>> raised_peak(66.8e9, {"forward": 72.7e9, "train": 79.7e9})
    (79700000000.0, 'train')
    >>> raised_peak(178e9, {"train": 79.7e9})
    (178000000000.0, None)
    """
    fastest = max(rates, key=rates.__getitem__, default=None)
    if fastest is None or rates[fastest] <= peak:
        return peak, None
    return rates[fastest], fastest


class ShownPeak:
    """The peak to show a run's logged `perf/<phase>_mfu` against, row by row: the largest
    of each row's `perf/peak_gflops` and every rate a phase reached so far (`mfu x peak`),
    so that rows an older run logged against a low probe never show above 100%.

    >>> shown = ShownPeak()
    >>> shown.rescale({"step": 1, "perf/peak_gflops": 66.8, "perf/train_mfu": 0.5})
    ({'step': 1, 'perf/peak_gflops': 66.8, 'perf/train_mfu': 0.5}, None)
    >>> row, note = shown.rescale({"step": 2, "perf/peak_gflops": 66.8,
    ...     "perf/forward_mfu": 1.089, "perf/train_mfu": 1.193})
    >>> round(row["perf/train_mfu"], 3), round(row["perf/forward_mfu"], 3), row["perf/peak_gflops"]
    (1.0, 0.913, 79.6924)
    >>> note
    "step 2's train phase ran at 79.7 GFLOP/s, above the run's recorded peak of 66.8; MFU shown against 79.7 GFLOP/s"
    """

    def __init__(self) -> None:
        self.gflops = 0.0

    def rescale(self, row: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The row with its MFUs over the shown peak, and a note where this row raised it."""
        logged = row.get("perf/peak_gflops")
        keys = [k for k in row if k.startswith("perf/") and k.endswith("_mfu")]
        if not isinstance(logged, (int, float)) or not keys:
            return row, None
        rates = {k[5:-4]: row[k] * logged for k in keys if isinstance(row[k], (int, float))}
        shown, phase = raised_peak(max(self.gflops, logged), rates)
        note = None
        if phase is not None:
            note = (
                f"step {row.get('step', '?')}'s {phase} phase ran at {shown:.1f} GFLOP/s, above "
                f"the run's recorded peak of {max(self.gflops, logged):.1f}; MFU shown against "
                f"{shown:.1f} GFLOP/s"
            )
        self.gflops = shown
        if shown == logged:
            return row, note
        out = dict(row)
        out.update({f"perf/{p}_mfu": rate / shown for p, rate in rates.items()})
        out["perf/peak_gflops"] = shown
        return out, note


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
    write_peak(root, peak)
    return peak


def write_peak(root: Path, peak: dict[str, Any]) -> None:
    """`perf_peak.json` in the run folder, replaced whole (never half written)."""
    replace_json(root / PEAK_FILE, peak)

"""Each role's measured peak memory beside the plan's figure: `memory.json` in the run folder.

What is compared, per role, is one rank (one worker process) at its peak, the unit the plan
counts in (`Plan.role_memory[role].active`):

- CPU run: the worker process's PSS (proportional set size: its private pages plus its
  share of the pages it maps with other processes, so the workers' PSS add up to what they
  hold together), read from `/proc/<pid>/smaps_rollup` by a thread of the driver process
  every `interval_s` seconds; a role's figure is the highest PSS any of its ranks reached.
  Sampling misses a spike shorter than the interval (0.5 s: a step of the embedded model
  on 2 cores lasts tens of seconds, and its peaks are phases of seconds).
- GPU run: `torch.cuda.max_memory_allocated()` of each rank, asked of the workers after
  every step (`ProcessControl.peak_gpu_memory`); a rank on another node reports its own.

Roles that share one process share one PSS: with `train.lora` the reference is actor_train
with its adapters off (the plan then has no `reference` role either). The driver process
(data, batches between stages) is recorded as `driver`, with no planned figure.

The file is rewritten (atomically) whenever a peak grows, at most every `write_every_s`
seconds, and when the run stops, so a killed run keeps the peaks it reached. A peak more
than `OVER_PLAN` times the plan's figure (the 15% the planner promises) writes one warning
event naming the role, unless the run asks for none (`warn=False`: the tiny-random test
model, whose few MiB of weights leave the plan's figure to the Python process around them,
a 1.2x to 1.5x "overrun" of nothing a user plans for).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

MEMORY_FILE = "memory.json"
OVER_PLAN = 1.15  # a measured peak above this many times the plan's figure is warned about
DRIVER = "driver"  # the driver process's own row (no plan figure)


def pss_bytes(pid: int) -> int | None:
    """Process `pid`'s proportional set size in bytes; None when the process is gone or the
    OS does not say (no /proc and no psutil)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024  # kB
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return None
    except OSError:
        pass
    try:
        import psutil

        return int(psutil.Process(pid).memory_full_info().pss)
    except Exception:  # no psutil, no such process, no pss on this OS
        return None


def read_memory(run_root: str | Path) -> dict[str, Any]:
    """The run's `memory.json` ({} when the run wrote none)."""
    path = Path(run_root) / MEMORY_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def ratio(row: dict[str, Any]) -> float | None:
    """measured / planned of one role's row, None without both."""
    planned, measured = row.get("planned_bytes"), row.get("measured_bytes")
    return measured / planned if planned and measured is not None else None


class PeakMemory:
    """The peaks of a run's roles, sampled (CPU) or reported (GPU), written to `memory.json`.

    `log_event` is the run's event log (`RunDir.log_event`); `step` a callable giving the
    current step, stamped on each new peak.
    """

    def __init__(
        self,
        root: str | Path,
        planned: dict[str, int],
        *,
        measure: str = "pss",
        log_event: Any = None,
        step: Any = None,
        interval_s: float = 0.5,
        write_every_s: float = 2.0,
        warn: bool = True,
    ) -> None:
        self.path = Path(root) / MEMORY_FILE
        self.warn = warn
        self.measure = measure
        self.interval_s = interval_s
        self.write_every_s = write_every_s
        self._log_event = log_event or (lambda message: None)
        self._step = step or (lambda: None)
        self._lock = threading.Lock()
        self._pids: dict[str, list[int]] = {}
        self._warned: set[str] = set()
        self._dirty = False
        self._written = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        previous = read_memory(root).get("roles", {})  # a resumed run keeps its peaks
        self.roles: dict[str, dict[str, Any]] = {}
        for role, bytes_ in planned.items():
            self.roles[role] = {"planned_bytes": int(bytes_), "measured_bytes": None}
        for role, row in previous.items():
            if row.get("measured_bytes") is not None and row.get("measure", measure) == measure:
                mine = self.roles.setdefault(role, {"planned_bytes": None})
                mine.update(measured_bytes=row["measured_bytes"], at_step=row.get("at_step"))
                mine["measure"] = measure
        self._warned = {r for r, row in self.roles.items() if (ratio(row) or 0) > OVER_PLAN}

    # ---- CPU: sample the workers' PSS from this process ------------------------------------
    def watch(self, pids: dict[str, list[int]]) -> None:
        """Sample these processes (role -> its ranks' pids; the driver is added) from now on;
        called again with the new pids after workers restart."""
        with self._lock:
            self._pids = {**pids, DRIVER: [os.getpid()]}
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="roll-memory", daemon=True)
            self._thread.start()

    def sample(self) -> None:
        """One sample of every watched process (the thread calls this every `interval_s`)."""
        with self._lock:
            pids = dict(self._pids)
        for role, ranks in pids.items():
            values = [v for v in (pss_bytes(pid) for pid in ranks) if v is not None]
            if values:
                self.update(role, max(values))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()
            if self._dirty and time.monotonic() - self._written >= self.write_every_s:
                self.write()

    # ---- both ------------------------------------------------------------------------------
    def update(self, role: str, measured: int) -> None:
        """A measured figure of `role` (one rank); kept if it is the role's new peak."""
        with self._lock:
            row = self.roles.setdefault(role, {"planned_bytes": None, "measured_bytes": None})
            if row["measured_bytes"] is not None and measured <= row["measured_bytes"]:
                return
            row.update(measured_bytes=int(measured), measure=self.measure, at_step=self._step())
            self._dirty = True
            over = ratio(row)
            warn = self.warn and over is not None and over > OVER_PLAN
            warn = warn and role not in self._warned
            if warn:
                self._warned.add(role)
        if warn:
            self._log_event(
                f"warning: {role} peaked at {_mib(measured)} ({self.measure}), {over:.2f}x "
                f"the plan's {_mib(row['planned_bytes'])} (more than {OVER_PLAN - 1:.0%} over; "
                "see `roll runs show`)"
            )
            self.write()

    def write(self) -> None:
        with self._lock:
            data = {
                "measure": self.measure,
                "interval_s": self.interval_s if self.measure == "pss" else None,
                "updated": time.time(),
                "roles": {role: dict(row) for role, row in self.roles.items()},
            }
            self._dirty = False
            self._written = time.monotonic()
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        os.replace(tmp, self.path)

    def stop(self) -> None:
        """Take a last sample, stop the thread and write the file."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1)
            self.sample()
        self.write()


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:,.0f} MiB"

"""What a run measures of the machine once and keeps: the CPU's model and flags, and a
cache of measurements (`$ROLL_CACHE/<kind>/`, one JSON file per key: the matmul peak of
tracking/peak.py, the bf16 probe of planning/cpu_bf16.py), so the runs of one machine use
the same figure and only the first pays for the probe. Delete a file to measure again.
Imports no torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (`/proc/cpuinfo`, else `platform`)."""
    for line in _cpuinfo_lines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cpu_flags() -> set[str]:
    """The CPU's feature flags (`/proc/cpuinfo`; empty where it cannot be read)."""
    for line in _cpuinfo_lines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def _cpuinfo_lines() -> list[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return [line for line, _ in zip(f, range(64), strict=False)]
    except OSError:
        return []


def cached_measurement(
    kind: str, key: dict[str, Any], measure: Callable[[], dict[str, Any]], cache: Path | None = None
) -> dict[str, Any]:
    """The record cached in `cache` (default `$ROLL_CACHE/<kind>`) for `key`, else
    `measure()` taken now and cached, with `measured_at`; `cached` says which and
    `cache_file` names the file. A machine whose cache cannot be written measures each time."""
    from rollcli.models.loading import cache_dir

    key = json.loads(json.dumps(key))  # as the file holds it (a tuple reads back a list)
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = (cache or cache_dir() / kind) / f"{digest}.json"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("key") == key:
            return {**record, "cached": True, "cache_file": str(path)}
    except (OSError, ValueError):
        pass  # none yet, or unreadable: measure
    record = {"key": key, **measure(), "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    write_cached(path, record)
    return {**record, "cached": False, "cache_file": str(path)}


def write_cached(path: Path, record: dict[str, Any]) -> None:
    """`record` in the machine's cache; nothing where the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_json(path, record)
    except OSError:
        pass


def replace_json(path: Path, record: dict[str, Any]) -> None:
    """`record` as `path`, replaced whole, never half written (a temporary file per process,
    as several workers of a machine may write one file at once)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    tmp.replace(path)

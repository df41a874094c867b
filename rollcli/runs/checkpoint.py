"""Checkpoints that are never half-written: build in `.tmp-step-N`, fsync, rename.

A checkpoint is complete iff its folder is named `step-N` and holds `COMPLETE`; the newest
complete one is what resume and export read.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "COMPLETE"


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    checkpoints: Path, step: int, fill: Callable[[Path], None], state: dict[str, Any], keep_last: int
) -> Path:
    """Create `checkpoints/step-<step>/` atomically; `fill(tmp)` writes the model files."""
    final = checkpoints / f"step-{step}"
    tmp = checkpoints / f".tmp-step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fill(tmp)
    (tmp / "trainer_state.json").write_text(json.dumps(state, indent=2, default=float), encoding="utf-8")
    (tmp / MARKER).write_text(str(step), encoding="utf-8")
    _fsync_tree(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    prune(checkpoints, keep_last)
    return final


def complete_checkpoints(checkpoints: Path) -> list[tuple[int, Path]]:
    found = []
    if not checkpoints.exists():
        return found
    for path in checkpoints.iterdir():
        if path.name.startswith("step-") and (path / MARKER).exists():
            try:
                found.append((int(path.name[len("step-") :]), path))
            except ValueError:
                continue
    return sorted(found)


def latest_checkpoint(checkpoints: Path) -> Path | None:
    found = complete_checkpoints(checkpoints)
    return found[-1][1] if found else None


def prune(checkpoints: Path, keep_last: int) -> None:
    found = complete_checkpoints(checkpoints)
    for _, path in found[: max(0, len(found) - keep_last)]:
        shutil.rmtree(path, ignore_errors=True)
    for stale in checkpoints.glob(".tmp-step-*"):
        shutil.rmtree(stale, ignore_errors=True)

"""Room on disk for a run's next checkpoint: checked before each write, warned of after.

A checkpoint is as large as the one before it (the same weights and optimizer states), so
the newest full checkpoint of the run (the largest of its complete ones: older ones may have
dropped their optimizer states) is the next one's size. Before a write, free space below it
stops the run with `DiskFullError` and nothing written; after a write, free space below the
checkpoint just written warns that the next one will not fit, while there is time to free
some (`roll runs gc`). A run's first checkpoint has no size to go by: a write that runs out
of disk anyway removes its partial folder and raises the same error (`write_checkpoint`).

Free space is `shutil.disk_usage` of the checkpoints folder (the file system it is on).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rollcli.runs.checkpoint import DiskFullError, complete_checkpoints

GB = 2**30  # df -h's and du -h's G


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under `folder` (symbolic links not followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.stat(path).st_size
    return total


def next_checkpoint_bytes(checkpoints: Path) -> int | None:
    """The size the next checkpoint will take: the largest complete one so far; None
    before the first."""
    sizes = [folder_bytes(path) for _, path in complete_checkpoints(checkpoints)]
    return max(sizes) if sizes else None


def free_bytes(checkpoints: Path) -> int:
    return shutil.disk_usage(checkpoints).free


def gb(num_bytes: float) -> str:
    """`1.54 GB` (GB = 2**30 bytes), or `153.2 MB` below 1 GB.

    >>> gb(1.54 * GB), gb(153.2 * 2**20), gb(0)
    ('1.54 GB', '153.2 MB', '0.0 MB')
    """
    if num_bytes >= GB:
        return f"{num_bytes / GB:.2f} GB"
    return f"{num_bytes / 2**20:.1f} MB"


def check_room(checkpoints: Path, step: int) -> None:
    """Raise `DiskFullError` if checkpoint `step` would not fit beside what is on the disk."""
    need = next_checkpoint_bytes(checkpoints)
    if need is None:
        return
    free = free_bytes(checkpoints)
    if free < need:
        raise DiskFullError(
            f"no room for checkpoint step-{step}: {gb(free)} free on {checkpoints}'s disk, "
            f"a checkpoint takes {gb(need)}; nothing was written; free space (roll runs gc, "
            "roll runs rm) and resume"
        )


def low_space_warning(checkpoints: Path, written: Path) -> str | None:
    """After checkpoint `written`: a warning when the next one of its size will not fit."""
    size = folder_bytes(written)
    free = free_bytes(checkpoints)
    if free >= size:
        return None
    return (
        f"warning: disk nearly full: {gb(free)} free on {checkpoints}'s disk, the next "
        f"checkpoint needs {gb(size)}; free space (roll runs gc) or the run stops before it"
    )

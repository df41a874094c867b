"""Checkpoints that are never half-written: build in `.tmp-step-N`, fsync, rename.

A checkpoint is complete iff its folder is named `step-N` and holds `COMPLETE`; the newest
complete one is what resume and export read.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "COMPLETE"
STATE_FILE = "trainer_state.json"


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            fsync_path(path)
    fsync_path(folder)


def fsync_path(path: Path) -> None:
    """Flush a file, or a folder's entries, to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(
    checkpoints: Path,
    step: int,
    fill: Callable[[Path], None],
    state: dict[str, Any],
    keep_last: int,
    before_rename: Callable[[], None] | None = None,
) -> Path:
    """Create `checkpoints/step-<step>/` atomically; `fill(tmp)` writes the model files.
    Then the oldest beyond `keep_last` go (`prune`). A write that runs out of disk removes
    its temporary folder and raises `DiskFullError`."""
    final = checkpoints / f"step-{step}"
    tmp = checkpoints / f".tmp-step-{step}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill(tmp)
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2, default=float), encoding="utf-8")
        (tmp / MARKER).write_text(str(step), encoding="utf-8")
        _fsync_tree(tmp)
    except Exception as exc:
        if not is_disk_full(exc):
            raise
        shutil.rmtree(tmp, ignore_errors=True)
        raise DiskFullError(
            f"the disk filled up while checkpoint step-{step} was written in {checkpoints}; "
            "its partial folder was removed; free space (roll runs gc, roll runs rm) and resume"
        ) from None
    if before_rename is not None:
        before_rename()
    if final.exists():  # never delete a complete checkpoint before its successor is in place
        old = checkpoints / f".old-step-{step}"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(final, old)
    os.replace(tmp, final)
    fsync_path(checkpoints)
    prune(checkpoints, keep_last)
    return final


class DiskFullError(RuntimeError):
    """A checkpoint does not fit on the disk: it was not written, or its partial folder was
    removed (`write_checkpoint`, `disk_space.check_room`)."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a write that found no space left (ENOSPC, EDQUOT), also as a worker's
    error that Ray carries to the driver (its message, not its errno, survives)."""
    for err in (exc, exc.__cause__, getattr(exc, "cause", None)):
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text


class UnsafeCheckpointError(ValueError):
    """A checkpoint file holds more than tensors and plain data: it is not loaded."""


def load_tensors_file(path: Path, map_location: Any = None) -> Any:
    """A checkpoint file written with `torch.save` of tensors and plain containers (dict,
    list, tuple, str, int, float, bool, None), read with `weights_only=True`: loading it runs
    no code, whoever wrote the run folder. Anything else is refused in one line."""
    import pickle

    import torch

    try:
        return torch.load(path, weights_only=True, map_location=map_location)
    except pickle.UnpicklingError as err:
        found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(err))
        what = f" (a {found.group(1)})" if found else ""
        raise UnsafeCheckpointError(
            f"{path} holds objects other than tensors and plain data{what}; roll does not "
            "load it, since that could run code from the run folder. A checkpoint written by "
            "an older roll cannot be resumed: start the run again"
        ) from None


def read_state(checkpoint: Path) -> dict[str, Any]:
    """The driver-side state saved with a checkpoint (`trainer_state.json`)."""
    return json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8"))


def complete_checkpoints(checkpoints: Path) -> list[tuple[int, Path]]:
    found: list[tuple[int, Path]] = []
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
    """Keep the newest `keep_last` complete checkpoints and the best one (`best.json`)."""
    from rollcli.runs.best import read_best

    best = read_best(checkpoints)
    found = complete_checkpoints(checkpoints)
    for step, path in found[: max(0, len(found) - keep_last)]:
        if best is not None and step == best["step"]:
            continue
        remove_checkpoint(path)
    for pattern in (".tmp-step-*", ".old-step-*"):
        for stale in checkpoints.glob(pattern):
            shutil.rmtree(stale, ignore_errors=True)


def remove_checkpoint(path: Path) -> None:
    """Delete the checkpoint folder `path` (`.../step-N`): it is renamed `.old-step-N` first,
    so no `step-N` is ever partial, whenever the deletion stops."""
    doomed = path.with_name(f".old-{path.name}")
    shutil.rmtree(doomed, ignore_errors=True)
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def run_checkpoint(ref: str, runs_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of the run `ref` names (a run id under `runs_dir`, or
    a run folder), as an absolute path; None when `ref` names no run (a registry name or a
    model folder). A run with no checkpoint yet is an error."""
    from rollcli.config.errors import ConfigError

    for folder in (Path(runs_dir) / ref, Path(ref).expanduser()):
        if (folder / "recipe.yaml").is_file():
            checkpoint = latest_checkpoint(folder / "checkpoints")
            if checkpoint is None:
                raise ConfigError(
                    f"run {ref!r} has no complete checkpoint yet; use it as a model once one is "
                    "written (its run.save_every, or the end of the run)"
                )
            return checkpoint.resolve()
    return None

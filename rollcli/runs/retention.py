"""What `roll runs gc` deletes and `roll runs rm` refuses to: the rules, with no printing.

A run is live while its status is `starting` or `running` and its process is alive (or, on
another host, its heartbeat is fresh: `RunDir.effective_status`): neither command touches
one. A checkpoint that another run started from (`--model RUN_ID` records the checkpoint's
path as that run's model, which its resume and reference model read again) is in use: gc
keeps it, rm refuses its run unless forced.

gc deletes a run's complete checkpoints except the newest `keep_last`, the best one with
`keep_best` (`checkpoints/best.json`) and those written less than `older_than_s` ago, and
always its half-written ones (`.tmp-step-N`, `.old-step-N`: never read, left by a kill).
The warm-up sub-run inside an agentic run's folder (the model its RL started from) is not
looked at.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from rollcli.runs.best import read_best
from rollcli.runs.checkpoint import MARKER, complete_checkpoints, remove_checkpoint
from rollcli.runs.disk_space import folder_bytes
from rollcli.runs.run_dir import RunDir

LIVE = ("starting", "running")
HALF_WRITTEN = (".tmp-step-*", ".old-step-*")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class Doomed:
    """One checkpoint folder gc would delete. `step` is None for a half-written one."""

    run_id: str
    path: Path
    step: int | None
    size: int
    age_s: float
    best: bool = False


def parse_age(text: str) -> float:
    """Seconds of an age written `7d`, `12h`, `30m`, `90s` or `2w`.

    >>> parse_age("7d"), parse_age("12h"), parse_age("1.5h")
    (604800.0, 43200.0, 5400.0)
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text.lower())
    if found is None:
        raise ValueError(f"--older-than {text!r}: write an age as 7d, 12h, 30m, 90s or 2w")
    return float(found.group(1)) * _UNITS[found.group(2)]


def fmt_age(seconds: float) -> str:
    """`3d`, `5h`, `12m`, `40s`: the largest whole unit.

    >>> fmt_age(3 * 86400 + 7200), fmt_age(5400), fmt_age(40)
    ('3d', '1h', '40s')
    """
    for unit in ("d", "h", "m"):
        if seconds >= _UNITS[unit]:
            return f"{int(seconds // _UNITS[unit])}{unit}"
    return f"{max(0, int(seconds))}s"


def live_reason(folder: Path) -> str | None:
    """`running (pid 1234 on host)` when the run in `folder` is live, else None."""
    run = RunDir(folder)
    status = run.effective_status()
    if status not in LIVE:
        return None
    st = run.read_status()
    return f"{status} (pid {st.get('pid', '?')} on {st.get('host', '?')})"


def run_folders(runs_dir: Path) -> list[Path]:
    """Every run folder in `runs_dir` (a folder with a `recipe.yaml`), by name."""
    if not runs_dir.is_dir():
        return []
    return sorted(p for p in runs_dir.iterdir() if (p / "recipe.yaml").is_file())


def models_in_use(runs_dir: Path) -> dict[Path, str]:
    """Checkpoint folder (resolved) -> the id of a run in `runs_dir` whose model it is."""
    used: dict[Path, str] = {}
    for folder in run_folders(runs_dir):
        model = RunDir(folder).read_status().get("model")
        if not isinstance(model, str) or "/checkpoints/" not in model:
            continue
        path = Path(model).expanduser()
        if path.is_dir():
            used.setdefault(path.resolve(), folder.name)
    return used


def gc_run(
    folder: Path,
    keep_last: int | None,
    keep_best: bool,
    older_than_s: float | None,
    in_use: dict[Path, str],
    now: float | None = None,
) -> tuple[list[Doomed], list[str]]:
    """The checkpoints of the (not live) run in `folder` that gc deletes, oldest first, and
    a note for each one it keeps only because another run uses it."""
    now = time.time() if now is None else now
    checkpoints = folder / "checkpoints"
    found = complete_checkpoints(checkpoints)
    newest = {step for step, _ in found[len(found) - keep_last :]} if keep_last else set()
    marked = read_best(checkpoints)
    best_step = None if marked is None else int(marked["step"])
    doomed: list[Doomed] = []
    notes: list[str] = []
    for step, path in found:
        age = now - (path / MARKER).stat().st_mtime
        if step in newest or (keep_best and step == best_step):
            continue
        if older_than_s is not None and age < older_than_s:
            continue
        user = in_use.get(path.resolve())
        if user is not None:
            notes.append(f"kept {folder.name}/{path.name}: run {user} started from it")
            continue
        size = folder_bytes(path)
        doomed.append(Doomed(folder.name, path, step, size, age, best=step == best_step))
    for pattern in HALF_WRITTEN:
        for path in sorted(checkpoints.glob(pattern)):
            age = now - path.stat().st_mtime
            doomed.append(Doomed(folder.name, path, None, folder_bytes(path), age))
    return doomed, notes


def delete(doomed: list[Doomed]) -> int:
    """Delete each folder of `doomed` (a complete checkpoint renamed away first, so none is
    ever seen half-deleted); the bytes freed."""
    for item in doomed:
        if item.step is None:
            shutil.rmtree(item.path, ignore_errors=True)
        elif item.path.exists():
            remove_checkpoint(item.path)
    return sum(item.size for item in doomed)


def users_elsewhere(folder: Path, in_use: dict[Path, str], removed: set[str]) -> list[str]:
    """`RUN/step-N is run B's model` for each checkpoint of the run in `folder` that a run
    not in `removed` started from."""
    lines = []
    for _, path in complete_checkpoints(folder / "checkpoints"):
        user = in_use.get(path.resolve())
        if user is not None and user not in removed:
            lines.append(f"{folder.name}/{path.name} is run {user}'s model")
    return lines


def remove_run(folder: Path) -> int:
    """Delete the run folder `folder`: renamed to `.removing-ID` beside it and its
    `recipe.yaml` removed first, so no command sees a half-deleted run; the bytes freed."""
    size = folder_bytes(folder)
    doomed = folder.with_name(f".removing-{folder.name}")
    shutil.rmtree(doomed, ignore_errors=True)
    folder.rename(doomed)
    (doomed / "recipe.yaml").unlink(missing_ok=True)
    shutil.rmtree(doomed)
    return size

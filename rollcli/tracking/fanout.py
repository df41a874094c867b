"""The `Tracker` protocol and `Trackers`, the one object RunControl logs to; it fans each
call out to the trackers that `run.trackers` names (`make_trackers`).

metrics.jsonl (`jsonl`) is written by the run folder itself (RunControl), so it has no
tracker object here; TensorBoard, SwanLab and W&B each have a module, imported only when
named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class Tracker(Protocol):
    def log(self, metrics: dict[str, Any], step: int) -> None:
        """Every number in `metrics` at `step` (`step` and `time` themselves excepted)."""

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The step's samples (prompt, response, reward, ...) as a table, where it has one."""

    def rewind(self, step: int) -> None:
        """Steps after `step` will be logged again: they must not show twice."""

    def close(self) -> None: ...


class Trackers:
    """Fan-out: each call goes to every tracker, in `run.trackers` order."""

    def __init__(self, trackers: list[Tracker]) -> None:
        self.trackers = trackers

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for t in self.trackers:
            t.log(metrics, step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        for t in self.trackers:
            t.log_samples(step, rows)

    def rewind(self, step: int) -> None:
        for t in self.trackers:
            t.rewind(step)

    def close(self) -> None:
        for t in self.trackers:
            t.close()


def make_trackers(
    names: list[str],
    run_dir: Path,
    recipe: dict[str, Any],
    run_id: str,
    *,
    mode: str = "offline",
    project: str = "roll",
) -> Trackers:
    """The trackers `names` (from `run.trackers`) writing into `run_dir`, with the resolved
    `recipe` as their run's config. Raises ConfigError (one line, naming the fix) for a
    tracker that is not installed or asked to log online without its API key; the ones
    already opened are closed first."""
    made: list[Tracker] = []
    try:
        for name in names:
            if name != "jsonl":  # metrics.jsonl: written by the run folder itself
                made.append(_open(name, run_dir, recipe, run_id, mode, project))
    except BaseException:
        Trackers(made).close()
        raise
    return Trackers(made)


def _open(
    name: str, run_dir: Path, recipe: dict[str, Any], run_id: str, mode: str, project: str
) -> Tracker:
    from rollcli.config.errors import ConfigError
    from rollcli.config.trackers import TRACKERS, tracker_problems

    problems = tracker_problems([name], mode)
    if problems:
        raise ConfigError(problems[0])
    if name == "tensorboard":
        from rollcli.tracking.tensorboard import TensorBoardTracker

        return TensorBoardTracker(run_dir / "tensorboard")
    if name == "swanlab":
        from rollcli.tracking.swanlab_tracker import SwanLabTracker

        return SwanLabTracker(run_dir, recipe, run_id, mode=mode, project=project)
    if name == "wandb":
        from rollcli.tracking.wandb_tracker import WandbTracker

        return WandbTracker(run_dir, recipe, run_id, mode=mode, project=project)
    raise ValueError(f"unknown tracker {name!r}; known: {', '.join(TRACKERS)}")

"""The trackers a run can write to (`run.trackers`), found without importing them.

Each tracker names its import, the pip line that installs it and where it logs. `jsonl`
(metrics.jsonl) is the run's own record: `roll logs`, `roll plot` and resume read it, so it
is always written, whether `run.trackers` lists it or not. SwanLab and W&B log offline into the run
folder unless the run asks for online logging and the tracker's API key is set (docs/runs.md).
Light on purpose: the config and `roll doctor` read it, so it imports no tracker.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TrackerInfo:
    name: str
    module: str | None  # the import it needs (None: built in)
    install: str  # how to get it
    folder: str  # where it writes inside the run folder
    key_env: str | None = None  # the API key's environment variable (online trackers)
    mode_env: str | None = None  # the tracker's own mode variable, e.g. WANDB_MODE=online


TRACKERS: dict[str, TrackerInfo] = {
    t.name: t
    for t in (
        TrackerInfo("jsonl", None, "built in", "metrics.jsonl"),
        TrackerInfo(
            "tensorboard", "tensorboard", 'pip install "tensorboard>=2.15"', "tensorboard/"
        ),
        TrackerInfo(
            "swanlab",
            "swanlab",
            'pip install "roll-rl[swanlab]"',
            "swanlab/",
            key_env="SWANLAB_API_KEY",
            mode_env="SWANLAB_MODE",
        ),
        TrackerInfo(
            "wandb",
            "wandb",
            'pip install "roll-rl[wandb]"',
            "wandb/",
            key_env="WANDB_API_KEY",
            mode_env="WANDB_MODE",
        ),
    )
}
ONLINE_TRACKERS = tuple(name for name, t in TRACKERS.items() if t.key_env)


def is_installed(name: str) -> bool:
    """Found on the path, not imported (wandb and swanlab take seconds to import)."""
    module = TRACKERS[name].module
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def wants_online(name: str, tracker_mode: str) -> bool:
    """`run.tracker_mode: online`, or the tracker's own variable (`WANDB_MODE=online`,
    `SWANLAB_MODE=online`), asks for online logging; local trackers never are."""
    info = TRACKERS[name]
    if info.key_env is None:
        return False
    return tracker_mode == "online" or os.environ.get(info.mode_env or "", "") == "online"


def online_problem(name: str, tracker_mode: str) -> str | None:
    """Why `name` cannot log online as asked (its API key is not set), else None."""
    info = TRACKERS[name]
    if wants_online(name, tracker_mode) and not os.environ.get(info.key_env or ""):
        return (
            f"{name} is asked to log online but {info.key_env} is not set; set it to your "
            f"{name} API key, or log offline (run.tracker_mode=offline, "
            f"unset {info.mode_env})"
        )
    return None


def tracker_problems(names: tuple[str, ...] | list[str], tracker_mode: str) -> list[str]:
    """One line per named tracker that cannot log as asked: not installed, or online
    without its API key."""
    problems = []
    for name in names:
        if not is_installed(name):
            problems.append(
                f"run.trackers names {name!r} but it is not installed: "
                f"{TRACKERS[name].install} (or drop it from run.trackers)"
            )
        elif (problem := online_problem(name, tracker_mode)) is not None:
            problems.append(problem)
    return problems


def where_it_logs(name: str, tracker_mode: str, project: str) -> str:
    """`offline: runs/<run-id>/wandb/` or `online: project roll` (for `roll doctor`)."""
    info = TRACKERS[name]
    if not wants_online(name, tracker_mode):
        return f"{'offline' if info.key_env else 'local'}: runs/<run-id>/{info.folder}"
    if online_problem(name, tracker_mode) is not None:
        return f"online asked, but {info.key_env} is not set"
    return f"online: project {project!r}"

"""Worker groups: what a scheduler needs of a role's ranks, and a group of worker objects
held in this process (`LocalGroup`) beside the Ray-actor `Cluster`.

The prompt scheduler (`rollout/prompt_scheduler.py`) sends requests to `workers`, polls
their progress and signals aborts; `roll eval` runs it on an `ActorInferWorker` and a
`RewardWorker` held as plain objects (no Ray), so held-out evaluation and training's
rollout and validation take the same path. A call on a plain object runs at once
(`calls.submit`).
"""

from __future__ import annotations

from typing import Any, Protocol

from rollcli.distributed.calls import Method, get, submit


class WorkerGroup(Protocol):
    """A role's ranks: `Cluster` (Ray actors) or `LocalGroup` (objects in this process)."""

    name: str
    world_size: int
    workers: list[Any]

    def poll(self, method: Method) -> list[Any]: ...

    def signal(self, method: Method, *args: Any) -> None: ...


class LocalGroup:
    """Worker objects of one role in this process, called as a `Cluster`'s ranks are."""

    def __init__(self, name: str, workers: list[Any]) -> None:
        self.name = name
        self.workers = list(workers)
        self.world_size = len(self.workers)

    def poll(self, method: Method) -> list[Any]:
        return get([submit(w, method) for w in self.workers])

    def signal(self, method: Method, *args: Any) -> None:
        for w in self.workers:
            submit(w, method, *args)

"""A `Cluster`: Ray actors of one worker class, with dispatch across ranks.

This is the one place where `ray.remote` is applied to worker classes. `call` runs a method
(named by reference: `cluster.call(ActorInferWorker.wake)`, see calls.py) on every rank
with the same arguments; `dispatch` splits a batch across ranks and gathers
the results in order. Given a `placement` (one `WorkerPlacement` per rank, from a GPU plan:
see placement.py) each rank goes into its placement-group bundle with its GPU share;
without one, Ray schedules ranks by `WorkerResources` alone (the CPU run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rollcli.data.batch import Batch, chunk_bounds
from rollcli.distributed.calls import Method, get, submit, submit_beside
from rollcli.distributed.placement import WorkerPlacement
from rollcli.distributed.process_control import with_process_control


@dataclass(frozen=True)
class WorkerResources:
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    max_concurrency: int = 1  # > 1 lets a progress() call run while a long call is busy
    # a "monitor" concurrency group: `Cluster.poll` calls run beside a busy worker while its
    # other calls still run one at a time, in the order they were sent
    monitor: bool = False


class Cluster:
    def __init__(
        self,
        name: str,
        worker_cls: type,
        world_size: int,
        resources: WorkerResources,
        init_args: Callable[[int], Any],
        placement: list[WorkerPlacement] | None = None,
    ) -> None:
        """`init_args(rank)`: the one args object rank `rank`'s worker is built from (its
        class's frozen `...Args`: runtime/worker_table.py)."""
        import ray

        if placement is not None and len(placement) != world_size:
            raise ValueError(f"{name}: {world_size} rank(s) but a placement for {len(placement)}")
        self.name = name
        self.world_size = world_size
        self.monitor = resources.monitor
        cls = with_process_control(worker_cls)
        remote_cls = (
            ray.remote(concurrency_groups={"monitor": 1})(cls) if self.monitor else ray.remote(cls)
        )
        self.workers = []
        for rank in range(world_size):
            where = (
                placement[rank].actor_options()
                if placement is not None
                else {"num_cpus": resources.num_cpus, "num_gpus": resources.num_gpus}
            )
            actor = remote_cls.options(
                name=None,
                max_concurrency=resources.max_concurrency,
                max_restarts=0,
                **where,
            ).remote(init_args(rank))
            self.workers.append(actor)

    def call_async(self, method: Method, *args: Any, **kwargs: Any) -> list:
        return [submit(w, method, *args, **kwargs) for w in self.workers]

    def poll(self, method: Method) -> list[Any]:
        """Call a cheap read-only `method` on every rank, beside whatever it is running."""
        if self.monitor:
            return get([submit_beside(w, method) for w in self.workers])
        return self.call(method)

    def signal(self, method: Method, *args: Any) -> None:
        """Send `method(*args)` to every rank beside whatever it is running (no waiting)."""
        for w in self.workers:
            (submit_beside if self.monitor else submit)(w, method, *args)

    def call(self, method: Method, *args: Any, **kwargs: Any) -> list[Any]:
        return get(self.call_async(method, *args, **kwargs))

    def call_rank(self, rank: int, method: Method, *args: Any, **kwargs: Any) -> Any:
        return get(submit(self.workers[rank], method, *args, **kwargs))

    def dispatch_async(self, method: Method, batch: Batch | list, **kwargs: Any) -> list:
        """Split `batch` (a Batch or a list) into one contiguous part per rank; return refs."""
        parts = (
            batch.chunk(self.world_size)
            if isinstance(batch, Batch)
            else [batch[a:b] for a, b in chunk_bounds(len(batch), self.world_size)]
        )
        return [
            submit(w, method, part, **kwargs) for w, part in zip(self.workers, parts, strict=True)
        ]

    def dispatch(self, method: Method, batch: Batch | list, **kwargs: Any) -> Any:
        return gather(get(self.dispatch_async(method, batch, **kwargs)))

    def kill(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w, no_restart=True)
        self.workers = []


def worker_lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for a worker whose process died (not for an exception raised in it)."""
    from ray.exceptions import RayActorError, WorkerCrashedError

    return (RayActorError, WorkerCrashedError)


def out_of_memory_error() -> type[BaseException]:
    """Ray's error for a worker its memory monitor killed (the machine ran low on memory)."""
    from ray.exceptions import OutOfMemoryError

    return OutOfMemoryError


def out_of_memory_message(exc: BaseException, step: int) -> str:
    """One line for a worker Ray killed for memory: which process held most, and what to
    lower. Ray's own text (the process table, its environment variables) is not for users."""
    import re

    top = re.search(r"\n\d+\t([\d.]+)\t(ray::[\w.]+)", str(exc))
    held = f" ({top.group(2).removeprefix('ray::')} held {top.group(1)} GB)" if top else ""
    return (
        f"a worker ran out of memory in step {step}{held}; lower train.micro_batch_tokens "
        "or train.micro_batch_size (memory grows with tokens per forward), "
        "rollout.batch_size, or agentic.max_context_tokens, then `roll resume`"
    )


def gather(results: list[Any]) -> Any:
    """Concatenate per-rank results: lists are joined, tensors catted on dim 0 (padded)."""
    import torch

    first = results[0]
    if isinstance(first, list):
        return [x for r in results for x in r]
    if isinstance(first, torch.Tensor):
        width = max(r.shape[1] for r in results) if first.dim() > 1 else None
        if width is not None:
            results = [torch.nn.functional.pad(r, (0, width - r.shape[1])) for r in results]
        return torch.cat(results, dim=0)
    if isinstance(first, Batch):
        return Batch.concat(results)
    return results

"""Start a local Ray (or join a cluster) with settings that suit a laptop."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

from rollcli.distributed.deepspeed_env import name_cpu_accelerator


def running_ray() -> Any:
    """The `ray` module when this process is in a Ray session, else None. Imports nothing:
    a process that never imported Ray is not in one (the GPU proof kit's machine has none)."""
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def start_ray(address: str | None = None, num_cpus: float | None = None, num_gpus: int = 0) -> dict:
    """Join the cluster at `address` (or `$RAY_ADDRESS`), else start a local session of the
    run's own; returns the cluster's resources. Idempotent within a process. A local
    session declares `num_gpus` GPUs (the run's `resources.gpus`; 0 on CPU)."""
    import ray

    if ray.is_initialized():
        return ray.cluster_resources()
    # The local cluster enables token auth by default and warns about it on every start.
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    kwargs: dict = {
        "logging_level": logging.WARNING,
        "log_to_driver": True,
        "configure_logging": True,
    }
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, **kwargs)
    else:
        cpus = num_cpus if num_cpus is not None else float(os.cpu_count() or 1)
        # A CPU session: workers that import deepspeed (the strategy, or transformers'
        # checks) would each warn that it fell back to the CPU; name the CPU instead.
        name_cpu_accelerator(on_gpu=bool(num_gpus))
        # Workers inherit it: torch's CPU tensors of 2 MiB and more go on transparent huge
        # pages (when the kernel offers them on request: `madvise`), so a fresh 100 MB
        # logits or gradient tensor is ~50 page faults, not ~25,000 (an rlvr-math train
        # step on smollm2-135m made ~400k faults without it, 27k with it).
        os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
        # "local": a session of the run's own, even when another Ray cluster runs on this
        # machine (a plain ray.init() would try to join the one it last started).
        with sigterm_blocked():  # Ray's daemons inherit it: they outlive a job's SIGTERM
            ray.init(
                address="local",
                num_cpus=cpus,
                num_gpus=num_gpus,
                include_dashboard=False,
                **kwargs,
            )
    return ray.cluster_resources()


@contextlib.contextmanager
def sigterm_blocked() -> Iterator[None]:
    """SIGTERM blocked in this thread while the block runs, so the processes it starts (a
    local Ray session's gcs_server, raylet and agents, which Ray starts in the driver's
    process group with SIGINT blocked) inherit it blocked: a SIGTERM sent to the whole job
    (`timeout`, Slurm) leaves them running while the driver stops the run with a
    checkpoint. They end at `stop_ray` (SIGKILL)."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def stop_ray_at_exit() -> None:
    """End the session when this process exits (`stop_ray`), before Ray's own exit handler:
    that one ends the local daemons gracefully, and with SIGTERM blocked in them (above)
    each waited out its grace period, ~7 s after every `roll train` had finished."""
    atexit.register(stop_ray)  # atexit runs last-in first: before ray's, registered at import


def stop_ray() -> None:
    """End the session; a local session's daemons, which ignore SIGTERM (`sigterm_blocked`),
    are killed at once rather than after Ray's grace period for a SIGTERM (~1 s each)."""
    import ray

    if not ray.is_initialized():
        return
    node = getattr(getattr(ray, "_private", None), "worker", None)
    node = getattr(node, "_global_node", None)
    kill = getattr(node, "kill_all_processes", None)
    daemons: set[int] = set()
    if node is not None and kill is not None and node.is_head():  # our local session
        daemons = descendants({p.process.pid for ps in node.all_processes.values() for p in ps})
        node.kill_all_processes = lambda **kw: kill(**{**kw, "allow_graceful": False})
    ray.shutdown()
    for pid in daemons:  # the agents raylet started: with SIGTERM blocked, none ends itself
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def descendants(roots: set[int], proc: str = "/proc") -> set[int]:
    """`roots` and every process below them (Linux /proc; `roots` alone elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir(proc) if os.path.isdir(proc) else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(os.path.join(entry.path, "stat")) as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found

"""Start a local Ray (or join a cluster) with settings that suit a laptop."""

from __future__ import annotations

import logging
import os
import sys
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
        ray.init(
            address="local",
            num_cpus=cpus,
            num_gpus=num_gpus,
            include_dashboard=False,
            **kwargs,
        )
    return ray.cluster_resources()


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()

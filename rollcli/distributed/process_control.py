"""What every worker process answers besides its role's methods: its pid, its Ray node and
its RNG state.

`Cluster` mixes this into each worker class when it applies `ray.remote`, so worker classes
stay plain (and testable without Ray) while the driver can checkpoint every process's
generators and, for fault-injection tests, find the process to kill; and each worker
process outlives a SIGTERM sent to the whole job, until the driver has written the run's
checkpoint (`survive_job_signals`).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from rollcli.runs.rng import capture_rng, restore_rng


class ProcessControl:
    def process_id(self) -> int:
        return os.getpid()

    def node(self) -> dict[str, str]:
        """`{"id", "ip"}` of the Ray node this worker runs on."""
        import ray

        return {
            "id": ray.get_runtime_context().get_node_id(),
            "ip": ray.util.get_node_ip_address(),
        }

    def peak_gpu_memory(self) -> int | None:
        """torch's peak allocated bytes on this process's GPU (None: it uses none)."""
        import torch

        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return None
        return int(torch.cuda.max_memory_allocated())

    def rng_state(self) -> dict[str, Any]:
        return capture_rng()

    def load_rng_state(self, state: dict[str, Any]) -> None:
        restore_rng(state)


def survive_job_signals() -> None:
    """Ignore SIGTERM in this worker process: a scheduler that stops the job signals all its
    processes at once (`timeout`, Slurm, a container's stop), and the driver, which handles
    it, still needs the workers to write the run's checkpoint. The driver ends them itself
    (SIGKILL through Ray) when the run is over. Only a main thread can set a handler."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def with_process_control(worker_cls: type) -> type:
    """`worker_cls` with `ProcessControl`'s methods, under the same name (Ray shows it),
    its process ignoring SIGTERM from its construction on (`survive_job_signals`)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        survive_job_signals()
        worker_cls.__init__(self, *args, **kwargs)

    return type(
        worker_cls.__name__,
        (worker_cls, ProcessControl),
        {"__module__": worker_cls.__module__, "__init__": __init__},
    )

"""What every worker process answers besides its role's methods: its pid, its Ray node and
its RNG state.

`Cluster` mixes this into each worker class when it applies `ray.remote`, so worker classes
stay plain (and testable without Ray) while the driver can checkpoint every process's
generators and, for fault-injection tests, find the process to kill.
"""

from __future__ import annotations

import os
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


def with_process_control(worker_cls: type) -> type:
    """`worker_cls` with `ProcessControl`'s methods, under the same name (Ray shows it)."""
    return type(
        worker_cls.__name__, (worker_cls, ProcessControl), {"__module__": worker_cls.__module__}
    )

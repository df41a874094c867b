"""Where a worker's model and tensors live: the one place a worker's device is chosen.

A worker placed in a GPU bundle of the run's plan is given `num_gpus > 0` (its share of one
GPU). Ray then sets `CUDA_VISIBLE_DEVICES` in the worker's process to the GPU it assigned,
so that GPU is `cuda:0` there. A worker given no GPU runs on the CPU, whatever the machine
has. A worker given a GPU in a process where torch sees no CUDA refuses with a clear error
rather than falling back to the CPU: the plan reserved GPUs for it, and a silent CPU run
on a GPU plan would be slower by orders of magnitude and look like a hang.

Everything a worker returns to the driver goes through `to_cpu` first: Ray must never
pickle CUDA tensors (the driver may have no GPU, and each would pin the worker's memory).
"""

from __future__ import annotations

from typing import Any

import torch

from rollcli.data.batch import Batch
from rollcli.distributed.calls import node_and_gpus


class DeviceUnavailableError(RuntimeError):
    """A worker was given a GPU but torch in its process cannot use CUDA."""


def pick_device(num_gpus: float, *, cuda_available: bool | None = None) -> torch.device:
    """The device of a worker given `num_gpus` (0, a fraction or whole GPUs).

    >>> pick_device(0)
    device(type='cpu')
    >>> pick_device(0.5, cuda_available=True)
    device(type='cuda', index=0)
    """
    if num_gpus <= 0:
        return torch.device("cpu")
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if not cuda_available:
        raise DeviceUnavailableError(
            f"this worker was given {num_gpus:g} GPU but torch sees no CUDA here "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); install "
            "the CUDA build of torch matching the driver, or train on CPU with --gpus 0"
        )
    return torch.device("cuda", 0)  # Ray's CUDA_VISIBLE_DEVICES: the assigned GPU is first


def batch_to(batch: Batch, device: torch.device) -> Batch:
    """The batch with its tensors on `device` (the same batch when they are already there)."""
    if all(t.device == device for t in batch.tensors.values()):
        return batch
    tensors = {k: t.to(device) for k, t in batch.tensors.items()}
    return Batch(tensors=tensors, fields=batch.fields, meta=batch.meta)


def to_cpu(value: Any) -> Any:
    """`value` with every tensor in it (also inside dicts, lists and tuples) on the CPU."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_cpu(v) for v in value)
    return value


def device_slot(device: torch.device) -> dict[str, Any]:
    """`{"type", "node", "gpus"}`: the device type, and under Ray the node and the GPU ids
    Ray assigned this process (what tells two workers on one GPU apart from two on two);
    on CUDA also `uuid`, the physical GPU's, the same in every process that uses it
    whatever its CUDA_VISIBLE_DEVICES (`weight_sync.choose_backend`: one GPU, IPC)."""
    slot: dict[str, Any] = {"type": device.type, "node": None, "gpus": []}
    if device.type != "cuda":
        return slot
    slot["node"], slot["gpus"] = node_and_gpus()
    slot["uuid"] = str(torch.cuda.get_device_properties(device).uuid)
    return slot

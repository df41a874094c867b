"""Send weights from actor_train (rank 0) to actor_infer workers (ranks 1..N) by broadcast.

A dedicated process group (gloo on CPU, the same calls NCCL serves on GPU) is built from a
TCP store, independent of any training process group. Tensors travel in flat buckets of
one dtype, in the model's `state_dict` order, with tied weights sent once.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist

BUCKET_BYTES = 256 * 1024 * 1024


def _unique_tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    seen: set[int] = set()
    out = []
    for tensor in model.state_dict(keep_vars=True).values():
        ptr = tensor.data_ptr()
        if ptr in seen:
            continue
        seen.add(ptr)
        out.append(tensor)
    return out


def _buckets(tensors: list[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
    bucket: list[torch.Tensor] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        if bucket and (size + nbytes > BUCKET_BYTES or t.dtype != bucket[0].dtype):
            yield bucket
            bucket, size = [], 0
        bucket.append(t)
        size += nbytes
    if bucket:
        yield bucket


def _group(host: str, port: int, rank: int, world_size: int, timeout_s: float) -> dist.ProcessGroup:
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, rank == 0, timeout=timeout)
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


def _broadcast(group: dist.ProcessGroup, tensor: torch.Tensor) -> None:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    group.broadcast([tensor], opts).wait()


class WeightSender:
    """Rank 0 of the sync group (lives in actor_train)."""

    def __init__(self, host: str, port: int, world_size: int, timeout_s: float = 600) -> None:
        self.group = _group(host, port, 0, world_size, timeout_s)

    @torch.no_grad()
    def send(self, model: torch.nn.Module) -> float:
        start = time.perf_counter()
        for bucket in _buckets(_unique_tensors(model)):
            flat = torch.cat([t.detach().reshape(-1) for t in bucket])
            _broadcast(self.group, flat)
        return time.perf_counter() - start


class WeightReceiver:
    """Ranks 1..N of the sync group (one per actor_infer worker)."""

    def __init__(
        self, host: str, port: int, rank: int, world_size: int, timeout_s: float = 600
    ) -> None:
        self.group = _group(host, port, rank, world_size, timeout_s)

    @torch.no_grad()
    def receive(self, model: torch.nn.Module) -> float:
        start = time.perf_counter()
        for bucket in _buckets(_unique_tensors(model)):
            flat = torch.empty(sum(t.numel() for t in bucket), dtype=bucket[0].dtype)
            _broadcast(self.group, flat)
            offset = 0
            for t in bucket:
                t.data.copy_(flat[offset : offset + t.numel()].view_as(t))
                offset += t.numel()
        return time.perf_counter() - start


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

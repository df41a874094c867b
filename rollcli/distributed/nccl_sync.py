"""NCCL weight sync between actor_train and actor_infer on GPUs.

The same protocol as weight_sync.py (rank 0 sends flat buckets of one dtype in `state_dict`
order, tied tensors once; ranks 1..N receive), over a dedicated NCCL group built from a
TCP store, with buckets on the GPU so no tensor crosses host memory. Refused on a machine
without CUDA: there the gloo path of weight_sync.py is the one to use. Unverified here (no
GPU): docs/gpu.md says how to check it.
"""

from __future__ import annotations

import datetime
import time

import torch
import torch.distributed as dist

from rollcli.distributed.weight_sync import LoadFn, _buckets, _unique_tensors


class NcclUnavailableError(RuntimeError):
    pass


def require_cuda() -> torch.device:
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        raise NcclUnavailableError(
            "NCCL weight sync needs CUDA GPUs and a torch built with NCCL; on CPU the gloo "
            "sync (rollcli.distributed.weight_sync) is used"
        )
    return torch.device("cuda", torch.cuda.current_device())


def _nccl_group(host: str, port: int, rank: int, world_size: int, timeout_s: float):  # noqa: ANN202
    device = require_cuda()
    timeout = datetime.timedelta(seconds=timeout_s)
    store = dist.TCPStore(host, port, world_size, rank == 0, timeout=timeout)
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = timeout
    return dist.ProcessGroupNCCL(store, rank, world_size, opts), device


def _broadcast(group, tensor: torch.Tensor) -> None:  # noqa: ANN001
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    group.broadcast([tensor], opts).wait()


class NcclWeightSender:
    """Rank 0 (actor_train): broadcasts its weights, gathered whole, bucket by bucket."""

    def __init__(self, host: str, port: int, world_size: int, timeout_s: float = 600) -> None:
        self.group, self.device = _nccl_group(host, port, 0, world_size, timeout_s)

    @torch.no_grad()
    def send(self, model: torch.nn.Module) -> float:
        start = time.perf_counter()
        for bucket in _buckets(_unique_tensors(model)):
            flat = torch.cat([t.detach().reshape(-1).to(self.device) for _, t in bucket])
            _broadcast(self.group, flat)
        torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


class NcclWeightReceiver:
    """Ranks 1..N (actor_infer): receive into the model in place or hand pairs to `load`."""

    def __init__(
        self, host: str, port: int, rank: int, world_size: int, timeout_s: float = 600
    ) -> None:
        self.group, self.device = _nccl_group(host, port, rank, world_size, timeout_s)

    @torch.no_grad()
    def receive(self, model: torch.nn.Module, load: LoadFn | None = None) -> float:
        start = time.perf_counter()
        pairs = []
        for bucket in _buckets(_unique_tensors(model)):
            dtype = bucket[0][1].dtype
            flat = torch.empty(sum(t.numel() for _, t in bucket), dtype=dtype, device=self.device)
            _broadcast(self.group, flat)
            offset = 0
            for names, tensor in bucket:
                new = flat[offset : offset + tensor.numel()].view(tensor.shape)
                offset += tensor.numel()
                if load is None:
                    tensor.data.copy_(new)
                else:
                    pairs += [(name, new) for name in names]
        if load is not None:
            load(iter(pairs))
        return time.perf_counter() - start

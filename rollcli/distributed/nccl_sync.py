"""The NCCL group of the weight sync between actor_train and actor_infer on GPUs.

The protocol is weight_sync.py's (rank 0 sends flat buckets of one dtype in `state_dict`
order, tied tensors once; ranks 1..N receive): `WeightSender(..., backend="nccl")` and
`WeightReceiver(..., backend="nccl")` build their group here, and their buckets then live
on this process's GPU (`cuda:0`: under Ray the GPU it assigned), so no tensor crosses host
memory. `weight_sync.choose_backend` picks NCCL only when every side is on a GPU of its
own. Refused on a machine without CUDA. Unverified here (no GPU): docs/gpu.md says how to
check it.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch
import torch.distributed as dist


class NcclUnavailableError(RuntimeError):
    pass


def require_cuda() -> torch.device:
    if not torch.cuda.is_available() or not dist.is_nccl_available():
        raise NcclUnavailableError(
            "NCCL weight sync needs CUDA GPUs and a torch built with NCCL; on CPU the gloo "
            "sync (rollcli.distributed.weight_sync, backend gloo) is used"
        )
    return torch.device("cuda", torch.cuda.current_device())


def nccl_group(
    store: Any, rank: int, world_size: int, timeout: datetime.timedelta
) -> tuple[Any, torch.device]:
    """An NCCL process group of `world_size` ranks over `store`, and this rank's GPU."""
    device = require_cuda()
    opts = dist.ProcessGroupNCCL.Options()
    opts._timeout = timeout
    return dist.ProcessGroupNCCL(store, rank, world_size, opts), device

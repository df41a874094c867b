"""The TCP stores that process groups rendezvous on (weight sync, data-parallel training).

The group's rank 0 opens the store on a port the kernel picks (`open_store`), so no other
process can take the port between choosing and binding it; the driver hands its `.port`
to the other ranks, which `connect_store` to it.
"""

from __future__ import annotations

import datetime
from typing import Any


def open_store(host: str, world_size: int, timeout: datetime.timedelta) -> Any:
    """Rank 0's store on a kernel-picked port (`.port`); returns without waiting for ranks."""
    import torch.distributed as dist

    return dist.TCPStore(host, 0, world_size, True, timeout=timeout, wait_for_workers=False)


def connect_store(host: str, port: int, world_size: int, timeout: datetime.timedelta) -> Any:
    """Another rank's handle on rank 0's store at `host:port`."""
    import torch.distributed as dist

    return dist.TCPStore(host, port, world_size, False, timeout=timeout)

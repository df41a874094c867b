"""The TCP stores that process groups rendezvous on (weight sync, data-parallel training).

The group's rank 0 opens the store on a port the kernel picks (`open_store`), so no other
process can take the port between choosing and binding it; the driver hands its `.port`,
with the address of rank 0's node (`node_address`), to the other ranks, which
`connect_store` to it. On a cluster of several machines the other ranks may run on other
nodes, so the address is the node's, as Ray knows it, never the loopback.
"""

from __future__ import annotations

import datetime
from typing import Any

from rollcli.distributed.ray_session import running_ray


def node_address() -> str:
    """The address other nodes reach this process's node at: Ray's node IP (the one given
    to `ray start --node-ip-address`), or the loopback outside Ray (one process, tests, the
    GPU proof kit on a machine without Ray: a process that never imported Ray is not in it)."""
    ray = running_ray()
    if ray is not None:
        return ray.util.get_node_ip_address()
    return "127.0.0.1"


def open_store(host: str, world_size: int, timeout: datetime.timedelta) -> Any:
    """Rank 0's store on a kernel-picked port (`.port`); returns without waiting for ranks."""
    import torch.distributed as dist

    return dist.TCPStore(host, 0, world_size, True, timeout=timeout, wait_for_workers=False)


def connect_store(host: str, port: int, world_size: int, timeout: datetime.timedelta) -> Any:
    """Another rank's handle on rank 0's store at `host:port`."""
    import torch.distributed as dist

    return dist.TCPStore(host, port, world_size, False, timeout=timeout)

"""Data-parallel actor_train ranks: their torch.distributed group, and how the driver
shards a batch so that N ranks make the same update as one worker on the whole batch.

The group: rank 0 opens a TCP store on a port the kernel picks (`open_store`, see
stores.py) and reports its node's address with it; the driver hands both to every rank
(which may run on other nodes), and all ranks join at once
(`join_group`: gloo on CPU, nccl on GPU). It is the default process group, the one
DeepSpeed, FSDP2 and `HFTrainer`'s gradient all-reduce use.

The shards: `Cluster.dispatch` gives rank r the r-th contiguous chunk of a batch. A
worker splits its chunk into mini-batches of `mini_batch_size / N` rows, one optimizer
step each, and the ranks average their gradients. `shard_order` reorders the batch so
that mini-batch k of rank r is the r-th part of the one-worker run's mini-batch k: every
optimizer step sees the same rows as with one worker.
"""

from __future__ import annotations

import datetime
import math
import os
from typing import Any, Protocol

from rollcli.config.strategy_spec import STRATEGIES
from rollcli.distributed import stores
from rollcli.distributed.calls import get

TIMEOUT = datetime.timedelta(seconds=600)


def open_store(host: str, world_size: int) -> Any:
    """Rank 0's store of the group; its `.port` is for the other ranks."""
    return stores.open_store(host, world_size, TIMEOUT)


def join_group(
    store: Any, host: str, port: int, rank: int, world_size: int, backend: str | None = None
) -> None:
    """Make this process rank `rank` of the default process group (rank 0 passes its
    store; the others connect to `host:port`). Returns once every rank has joined.
    `backend`: the worker's (nccl for a model on a GPU); default nccl when CUDA is there."""
    import torch
    import torch.distributed as dist

    if store is None:
        store = stores.connect_store(host, port, world_size, TIMEOUT)
    # DeepSpeed reads these; under Ray each rank sees only its own GPU, so LOCAL_RANK is 0.
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0")
    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=TIMEOUT)


class TrainRank(Protocol):
    """An actor_train rank as the data-parallel group meets (`workers/actor_train.py`)."""

    def open_train_group(self) -> tuple[str, int]: ...

    def join_train_group(self, host: str, port: int) -> None: ...


def connect(cluster: Any) -> str:
    """Join every rank of `cluster` (actor_train workers) in one process group; returns the
    `host:port` they met at (rank 0's node and the port its store took)."""
    host, port = cluster.call_rank(0, TrainRank.open_train_group)
    get(cluster.call_async(TrainRank.join_train_group, host, port))
    return f"{host}:{port}"


def shard_order(num_rows: int, mini_batch_size: int | None, world_size: int) -> list[int]:
    """Row order that makes rank r's contiguous chunk the r-th part of every mini-batch.

    `num_rows` and `mini_batch_size` must be multiples of `world_size`.

    >>> shard_order(8, 4, 2)  # mini-batches [0-3], [4-7]; rank 0: 0,1 and 4,5
    [0, 1, 4, 5, 2, 3, 6, 7]
    >>> shard_order(6, None, 3)
    [0, 1, 2, 3, 4, 5]
    """
    mini = mini_batch_size or num_rows
    if num_rows % world_size or mini % world_size:
        raise ValueError(
            f"{num_rows} rows in mini-batches of {mini} do not split over {world_size} ranks"
        )
    order: list[list[int]] = [[] for _ in range(world_size)]
    for start in range(0, num_rows, mini):
        rows = list(range(start, min(start + mini, num_rows)))
        part = len(rows) // world_size
        for r in range(world_size):
            order[r] += rows[r * part : (r + 1) * part]
    return [i for rank_rows in order for i in rank_rows]


def even_rows(num_rows: int, group_size: int, world_size: int) -> list[int]:
    """Rows of a batch, in whole groups of `group_size` contiguous rows, that split evenly
    over `world_size` ranks (ZeRO-3's gathers are collective: every rank needs as many rows):
    a multiple of lcm(world_size, group_size) rows. A short batch (dynamic sampling, group
    filtering) drops its last groups down to that; one shorter than that repeats its groups
    in order up to it, so every rank trains on something.

    >>> even_rows(6, 2, 4)  # 3 groups of 2 over 4 ranks: the first 2 groups
    [0, 1, 2, 3]
    >>> even_rows(3, 3, 2)  # 1 group of 3 over 2 ranks: repeated
    [0, 1, 2, 0, 1, 2]
    """
    if num_rows <= 0 or num_rows % group_size:
        raise ValueError(f"{num_rows} rows are not whole groups of {group_size}")
    unit = math.lcm(world_size, group_size)
    if num_rows >= unit:
        return list(range(num_rows - num_rows % unit))
    return [i % num_rows for i in range(unit)]


def token_budget(strategy: str, world_size: int, max_tokens: int | None) -> int | None:
    """The padded-token budget of a rank's micro-batches (`train.micro_batch_tokens`), for
    the update and the log-prob forwards alike.

    A budget splits rows by their lengths, so ranks may run different numbers of forwards.
    That is safe with one rank, or with the hf strategy (its ranks meet once per optimizer
    step, in the gradient all-reduce); FSDP2, DeepSpeed's ZeRO-3 and Megatron run collectives
    in every forward, where a rank with fewer forwards leaves the others waiting forever:
    there micro-batches are `micro_batch_size` rows, the same number on every rank.

    >>> token_budget("hf", 2, 4096), token_budget("deepspeed", 1, 4096)
    (4096, 4096)
    >>> token_budget("deepspeed", 2, 4096) is None, token_budget("fsdp2", 2, 4096) is None
    (True, True)
    """
    return max_tokens if STRATEGIES[strategy].rank_token_budget or world_size == 1 else None


def mean_metrics(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """Each metric averaged over the ranks that report it.

    >>> mean_metrics([{"loss": 1.0, "lr": 0.1}, {"loss": 3.0, "lr": 0.1}])
    {'loss': 2.0, 'lr': 0.1}
    """
    keys = dict.fromkeys(k for m in per_rank for k in m)
    return {
        k: sum(m[k] for m in per_rank if k in m) / sum(1 for m in per_rank if k in m) for k in keys
    }

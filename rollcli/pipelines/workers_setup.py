"""Create the worker clusters of an RL pipeline and plan their CPU threads.

On CPU the heavy roles (actor_train, actor_infer, reference, critic) are colocated: they
run in alternating phases of the loop, so each gets the threads of all the cores it shares
(never more), while Ray's fractional `num_cpus` only keeps the bookkeeping consistent.
Reward workers are light and get one thread each.

On GPUs a `DevicePlacement` (built from the run's plan) places the model roles: each role
has as many ranks as the plan gives it and each rank sits in its GPU's bundle, with its
share of that GPU passed to the worker as `num_gpus` (the worker then puts its model on
the GPU: `rollcli.strategies.device.pick_device`). A CPU run on a Ray cluster of several
nodes pins the heavy roles' ranks to nodes (`NodeSpread`). The plan's decisions (training
strategy and precision, engine, dtypes: `role_args.role_args`) are passed in by the
pipeline as `role_kwargs`; actor_train with more than one rank joins a data-parallel
process group here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from rollcli.distributed import data_parallel
from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.distributed.placement import DevicePlacement, NodeSpread
from rollcli.workers.actor_infer import ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.critic import CriticWorker
from rollcli.workers.reference import ReferenceWorker
from rollcli.workers.reward import RewardWorker

REWARD_CPUS = 0.1
SPREAD_ROLES = ("actor_train", "actor_infer", "reference", "critic")  # spread_nodes' order


@dataclass(frozen=True)
class CpuPlan:
    cores: float
    heavy_threads: int
    heavy_cpus: float


def plan_cpu(total_cores: float, heavy_roles: int, reward_workers: int) -> CpuPlan:
    spare = max(total_cores - REWARD_CPUS * reward_workers, 0.1)
    return CpuPlan(total_cores, max(1, int(total_cores)), round(spare / heavy_roles, 3))


@dataclass
class Clusters:
    actor_train: Cluster
    actor_infer: Cluster
    reward: Cluster
    reference: Cluster | None = None
    critic: Cluster | None = None
    train_group: str | None = None  # data parallel: the host:port the ranks met at

    def all(self) -> list[Cluster]:
        return [
            c
            for c in (self.actor_train, self.actor_infer, self.reward, self.reference, self.critic)
            if c
        ]

    def kill(self) -> None:
        for c in self.all():
            c.kill()


def create_clusters(
    *,
    model_path: str,
    seed: int,
    cores: float,
    infer_workers: int,
    reward_workers: int,
    train_kwargs: dict,
    reward_kwargs: dict,
    reference: bool,
    critic_kwargs: dict | None,
    role_kwargs: dict[str, dict] | None = None,
    train_workers: int = 1,
    placement: DevicePlacement | None = None,
    spread: NodeSpread | None = None,
) -> tuple[Clusters, CpuPlan]:
    """`role_kwargs`: per role, the plan's decisions as worker arguments (strategy, dtype,
    engine: `role_args.role_args`; default: plain hf in fp32); `train_workers`: actor_train's
    data-parallel ranks on CPU; `placement`: a GPU plan's placement, which then sets every
    model role's ranks (None: the CPU run); `spread`: a CPU run's nodes when the Ray
    cluster has several (each heavy role's ranks pinned by `spread_nodes`)."""

    def where(role: str) -> list | None:
        if placement is not None:
            return placement.for_role(role)
        if spread is not None and role in SPREAD_ROLES:
            counts = {"actor_train": train_workers, "actor_infer": infer_workers}
            return spread.ranks(SPREAD_ROLES.index(role), counts.get(role, 1), cpu.heavy_cpus)
        return None

    def ranks(role: str, default: int) -> int:
        return len(where(role) or []) or default

    def gpus(role: str, rank: int) -> float:
        """The GPU share of `role`'s rank `rank` (0: a CPU worker)."""
        slots = where(role)
        return slots[rank].num_gpus if slots else 0.0

    if placement is not None:
        train_workers = ranks("actor_train", train_workers)
        infer_workers = ranks("actor_infer", infer_workers)
    heavy = 1 + int(reference) + int(critic_kwargs is not None) + infer_workers + train_workers - 1
    cpu = plan_cpu(cores or float(os.cpu_count() or 1), heavy, reward_workers)
    heavy_res = WorkerResources(num_cpus=cpu.heavy_cpus)
    threads = cpu.heavy_threads
    planned = role_kwargs or {}
    # the plan's train.strategy, devices.actor_train (deepspeed ZeRO stage, ...), precision
    train_kwargs = {**planned.get("actor_train", {}), **train_kwargs}
    infer_kwargs = planned.get("actor_infer", {"engine": "hf"})
    clusters = Clusters(
        actor_train=Cluster(
            "actor_train",
            ActorTrainWorker,
            train_workers,
            heavy_res,
            lambda rank: {
                "model_path": model_path,
                "num_threads": max(1, threads // train_workers),
                "seed": seed,  # the same initial weights on every rank
                "rank": rank,
                "world_size": train_workers,
                "num_gpus": gpus("actor_train", rank),
                **train_kwargs,
            },
            placement=where("actor_train"),
        ),
        actor_infer=Cluster(
            "actor_infer",
            ActorInferWorker,
            infer_workers,
            WorkerResources(num_cpus=cpu.heavy_cpus, monitor=True),
            lambda rank: {
                "model_path": model_path,
                "num_threads": max(1, threads // infer_workers),
                "seed": seed + rank,
                "rank": rank,
                "num_gpus": gpus("actor_infer", rank),
                **infer_kwargs,  # engine, engine_kwargs, dtype
            },
            placement=where("actor_infer"),
        ),
        reward=Cluster(
            "reward",
            RewardWorker,
            reward_workers,
            WorkerResources(num_cpus=REWARD_CPUS),
            reward_kwargs,
        ),
    )
    if reference:
        clusters.reference = Cluster(
            "reference",
            ReferenceWorker,
            ranks("reference", 1),  # forward only: any number of ranks share a batch
            heavy_res,
            lambda rank: {
                "model_path": model_path,
                "num_threads": threads,
                "num_gpus": gpus("reference", rank),
                **planned.get("reference", {}),  # dtype
            },
            placement=where("reference"),
        )
    if critic_kwargs is not None:
        clusters.critic = Cluster(
            "critic",
            CriticWorker,
            1,
            heavy_res,
            {
                "model_path": model_path,
                "num_threads": threads,
                "seed": seed,
                "num_gpus": gpus("critic", 0),
                **critic_kwargs,
            },
            # one critic rank (its update is not data parallel yet): its first GPU's slot
            placement=(where("critic") or [])[:1] or None,
        )
    if train_workers > 1:
        clusters.train_group = data_parallel.connect(clusters.actor_train)
    return clusters, cpu

"""Where each worker (rank) of each role sits in a GPU plan: the bridge from `Plan` to Ray.

Pure Python (no Ray): `rollcli.distributed.placement` turns these slots into placement
groups. Rules:

* a training or forward role (actor_train, critic, reference) has one rank per GPU of its
  mapping (data parallel; megatron's tp/pp ranks are processes too);
* an inference role (actor_infer) has one rank per tensor-parallel group of `tp` GPUs: the
  engine in that worker drives the group;
* a GPU that `k` roles share (colocated) gives each of their ranks `1/k` of it (rounded
  down to Ray's 1e-4 resolution), so they time-share one bundle; a GPU of one role
  (separate) is that rank's alone.

>>> from rollcli.models.registry import get_model_spec
>>> from rollcli.planning import PlanInput, RoleRequest, make_plan
>>> plan = make_plan(PlanInput(get_model_spec("qwen2.5-0.5b"), num_gpus=2, roles=[
...     RoleRequest("actor_train", "0-1"), RoleRequest("actor_infer", "0-1")]))
>>> [(s.role, s.rank, s.gpus, s.gpu_share) for s in rank_slots(plan)]
[('actor_train', 0, (0,), 0.5), ('actor_train', 1, (1,), 0.5), ('actor_infer', 0, (0,), 0.5), ('actor_infer', 1, (1,), 0.5)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rollcli.planning.planner import Plan
from rollcli.planning.request import INFER_ROLES

GPU_RESOLUTION = 10_000  # Ray counts fractional resources in units of 1e-4


@dataclass(frozen=True)
class RankSlot:
    """One worker of a role: the global GPU indices it drives (its first one holds it), the
    node they are on, and the share of each GPU it reserves."""

    role: str
    rank: int
    gpus: tuple[int, ...]
    node: int
    gpu_share: float


def rank_slots(plan: Plan) -> list[RankSlot]:
    """Every rank of every GPU role of `plan`, role by role in the plan's order (none for a
    CPU plan, nor for roles mapped to "cpu")."""
    return [
        RankSlot(role, rank, gpus, gpus[0] // plan.node_size, share)
        for role, ranks in _role_ranks(plan).items()
        for rank, (gpus, share) in enumerate(ranks)
    ]


def role_gpu_shares(plan: Plan) -> dict[str, list[float]]:
    """Each GPU role's ranks' share of a GPU: `rank_slots`' `gpu_share`s, role by role,
    without building a slot per rank (a plan may have 100,000 GPUs)."""
    return {role: [share for _, share in ranks] for role, ranks in _role_ranks(plan).items()}


def _role_ranks(plan: Plan) -> dict[str, list[tuple[tuple[int, ...], float]]]:
    """(GPUs, share of each) of every rank, by role."""
    sharing, share = _sharing(plan)
    ranks = {}
    for role, where in plan.placements.items():
        if where == "cpu":
            continue
        step = plan.tp.get(role, 1) if role in INFER_ROLES else 1
        groups = [tuple(where[start : start + step]) for start in range(0, len(where), step)]
        ranks[role] = [(gpus, share[max(sharing[g] for g in gpus)]) for gpus in groups]
    return ranks


def _sharing(plan: Plan) -> tuple[dict[int, int], dict[int, float]]:
    """Roles on each GPU, and the share of a GPU that k roles sharing it get each."""
    sharing = {gpu: len(device.roles) for gpus, device in plan.gpu_groups for gpu in gpus}
    share = {k: math.floor(GPU_RESOLUTION / k) / GPU_RESOLUTION for k in set(sharing.values()) if k}
    return sharing, share


def role_world_sizes(plan: Plan) -> dict[str, int]:
    """Ranks per GPU role (a role with no GPU is absent)."""
    sizes: dict[str, int] = {}
    for slot in rank_slots(plan):
        sizes[slot.role] = sizes.get(slot.role, 0) + 1
    return sizes

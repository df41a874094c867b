"""Ray placement groups built from a GPU `Plan`: the same plan `roll plan` prints.

One placement group per node (STRICT_PACK), with one bundle `{"GPU": 1, "CPU": c}` per
GPU of that node that some role uses. Each rank (`rollcli.planning.ranks.rank_slots`) is
scheduled into the bundle of its first GPU with its share of it: roles that overlap in the
plan (colocated) share bundles with fractional GPUs and time-share them; disjoint roles
(separate) hold bundles of their own and run concurrently. A CPU plan needs no placement:
`DevicePlacement.build` returns None and workers are scheduled by `num_cpus` as before.

An inference rank of `tp > 1` drives `tp` GPUs, but a Ray actor takes resources from one
bundle only. So a small `GpuHold` actor takes the rank's share of each GPU of its group
(Ray's books then show the whole group taken) and says which GPU Ray gave it; the rank
itself takes its CPUs and no GPU, with `CUDA_VISIBLE_DEVICES` set to the holds' GPUs (and
Ray told not to overwrite it), so its engine's tensor-parallel processes see exactly the
group. vLLM's own answer (its Ray executor, `VLLM_RAY_BUNDLE_INDICES`) covers vLLM only;
this one also serves SGLang, which has no Ray executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.planning.planner import Plan
from rollcli.planning.ranks import RankSlot, rank_slots

# Ray then leaves an actor's CUDA_VISIBLE_DEVICES as its runtime_env sets it
NOSET_VISIBLE = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"


class PlacementError(RuntimeError):
    """The Ray cluster cannot hold the plan's bundles."""


@dataclass(frozen=True)
class WorkerPlacement:
    """Where one Ray actor goes: a bundle of a placement group and what it takes from it."""

    placement_group: Any
    bundle_index: int
    num_gpus: float
    num_cpus: float
    # a tensor-parallel group's GPUs, held by `GpuHold`s (empty: the GPU Ray gives the actor)
    visible_gpus: tuple[str, ...] = ()

    def actor_options(self) -> dict[str, Any]:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options: dict[str, Any] = {
            "num_gpus": self.num_gpus,
            "num_cpus": self.num_cpus,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self.placement_group,
                placement_group_bundle_index=self.bundle_index,
                placement_group_capture_child_tasks=True,
            ),
        }
        if self.visible_gpus:
            visible = {NOSET_VISIBLE: "1", "CUDA_VISIBLE_DEVICES": ",".join(self.visible_gpus)}
            options["runtime_env"] = {"env_vars": visible}
        return options


class GpuHold:
    """Holds a share of one GPU for a tensor-parallel inference rank (see the module
    docstring); `gpu` is the id Ray gave it, as CUDA_VISIBLE_DEVICES spells it."""

    def gpu(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_accelerator_ids()["GPU"][0])


class DevicePlacement:
    """The placement groups of a GPU plan and, per role, each rank's `WorkerPlacement`."""

    def __init__(self, plan: Plan, *, cpus_per_gpu: float = 1.0, timeout_s: float = 60) -> None:
        import ray
        from ray.util.placement_group import placement_group

        slots = rank_slots(plan)
        used = sorted({gpu for slot in slots for gpu in slot.gpus})
        nodes = sorted({gpu // plan.node_size for gpu in used})
        # bundle of each used GPU: (node, index within the node's group)
        self.bundles: dict[int, tuple[int, int]] = {}
        self.groups: dict[int, Any] = {}
        self.holds: list[Any] = []  # the GpuHold actors of tensor-parallel ranks
        for node in nodes:
            gpus = [g for g in used if g // plan.node_size == node]
            for index, gpu in enumerate(gpus):
                self.bundles[gpu] = (node, index)
            self.groups[node] = placement_group(
                [{"GPU": 1, "CPU": cpus_per_gpu} for _ in gpus],
                strategy="STRICT_PACK",
                name=f"roll-node-{node}",
            )
        ready = [pg.ready() for pg in self.groups.values()]
        done, _ = ray.wait(ready, num_returns=len(ready), timeout=timeout_s)
        if len(done) < len(ready):
            have = ray.cluster_resources()
            self.remove()
            raise PlacementError(
                f"Ray could not reserve {len(used)} GPU bundle(s) of {cpus_per_gpu:g} CPU on "
                f"{len(nodes)} node(s) within {timeout_s:g} s (the cluster has "
                f"{have.get('GPU', 0):g} GPU, {have.get('CPU', 0):g} CPU); check --gpus, "
                "--nodes and devices.num_gpus_per_node against the cluster"
            )
        visible = self._hold_groups(slots, timeout_s)
        self.roles: dict[str, list[WorkerPlacement]] = {}
        for slot, group in zip(slots, visible, strict=True):
            node, index = self.bundles[slot.gpus[0]]
            self.roles.setdefault(slot.role, []).append(
                WorkerPlacement(
                    self.groups[node],
                    index,
                    num_gpus=0 if group else slot.gpu_share,
                    num_cpus=round(cpus_per_gpu * slot.gpu_share, 4),
                    visible_gpus=group,
                )
            )

    def _hold_groups(self, slots: list[RankSlot], timeout_s: float) -> list[tuple[str, ...]]:
        """For each rank of several GPUs (a tp group), a `GpuHold` with its share of each of
        them; the GPU ids they got, rank by rank (empty for a rank of one GPU)."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        hold = ray.remote(GpuHold)
        ids: list[list[Any]] = []
        for slot in slots:
            holds: list[Any] = []
            for gpu in slot.gpus if len(slot.gpus) > 1 else ():
                node, index = self.bundles[gpu]
                where = PlacementGroupSchedulingStrategy(
                    placement_group=self.groups[node], placement_group_bundle_index=index
                )
                options = {"num_cpus": 0, "num_gpus": slot.gpu_share, "scheduling_strategy": where}
                holds.append(hold.options(**options).remote())
            self.holds += holds
            ids.append([h.gpu.remote() for h in holds])
        try:
            got = ray.get([ref for refs in ids for ref in refs], timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.remove()
            raise PlacementError(
                f"Ray could not start the GPU holds of {sum(map(bool, ids))} tensor-parallel "
                f"rank(s) within {timeout_s:g} s; check the cluster's GPUs against the plan"
            ) from None
        out, start = [], 0
        for refs in ids:
            out.append(tuple(got[start : start + len(refs)]))
            start += len(refs)
        return out

    @classmethod
    def build(cls, plan: Plan, **kwargs: Any) -> DevicePlacement | None:
        """The placement of a GPU plan; None for a CPU plan (nothing to reserve)."""
        return None if plan.mode == "cpu" else cls(plan, **kwargs)

    def for_role(self, role: str) -> list[WorkerPlacement] | None:
        return self.roles.get(role)

    def remove(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for hold in self.holds:
            ray.kill(hold)
        self.holds = []
        for pg in self.groups.values():
            remove_placement_group(pg)
        self.groups = {}


def spread_nodes(role_index: int, world_size: int, num_nodes: int) -> list[int]:
    """The node of each rank of the `role_index`-th heavy role when a CPU run spreads over
    `num_nodes` nodes: rank r on node (role_index + r) mod num_nodes. Data-parallel ranks
    land on different nodes, and each role starts one node further, so actor_infer (role 1)
    does not start on actor_train's rank-0 node.

    >>> spread_nodes(0, 2, 2), spread_nodes(1, 1, 2), spread_nodes(2, 1, 2)
    ([0, 1], [1], [0])
    >>> spread_nodes(1, 3, 1)
    [0, 0, 0]
    """
    return [(role_index + rank) % num_nodes for rank in range(world_size)]


@dataclass(frozen=True)
class NodePlacement:
    """One CPU rank pinned to one Ray node (see `NodeSpread`)."""

    node_id: str
    num_cpus: float
    num_gpus: float = 0.0  # a CPU rank (a GPU slot has its share)

    def actor_options(self) -> dict[str, Any]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return {
            "num_cpus": self.num_cpus,
            "num_gpus": 0,
            "scheduling_strategy": NodeAffinitySchedulingStrategy(self.node_id, soft=False),
        }


class NodeSpread:
    """A CPU run on a Ray cluster of several nodes (`--ray-address`): the heavy roles' ranks
    are pinned to nodes by `spread_nodes`, the driver's node first, so data-parallel ranks
    use the cores of different machines. One node: no spread (`build` returns None), Ray
    schedules by `num_cpus` as before."""

    def __init__(self, node_ids: list[str]) -> None:
        self.node_ids = node_ids

    @classmethod
    def build(cls) -> NodeSpread | None:
        import ray

        here = ray.get_runtime_context().get_node_id()
        nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
        ids = sorted((n["NodeID"] for n in nodes), key=lambda i: (i != here, i))
        return cls(ids) if len(ids) > 1 else None

    def ranks(self, role_index: int, world_size: int, num_cpus: float) -> list[NodePlacement]:
        nodes = spread_nodes(role_index, world_size, len(self.node_ids))
        return [NodePlacement(self.node_ids[n], num_cpus) for n in nodes]

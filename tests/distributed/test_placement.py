"""Placement groups from a GPU plan, on a Ray session that declares 4 logical GPUs (no GPU
needed): bundles match the plan, each rank lands in the bundle of its GPU, colocated roles
share a GPU and separate roles do not. Tiny actors only: nothing here starts torch on a GPU."""

from __future__ import annotations

import pytest

from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.distributed.placement import DevicePlacement, PlacementError
from rollcli.models.registry import get_model_spec
from rollcli.planning import PlanInput, RoleRequest, make_plan
from rollcli.planning.ranks import rank_slots, role_world_sizes


@pytest.fixture(scope="module", autouse=True)
def ray_with_four_gpus():
    import ray

    from rollcli.distributed.ray_session import stop_ray

    stop_ray()  # a session of its own, with 4 (fake) GPUs: not the suite's shared one
    ray.init(num_cpus=2, num_gpus=4, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()


@pytest.fixture
def placements():
    made: list[DevicePlacement] = []
    yield made.append
    for p in made:  # no placement group outlives its test
        p.remove()


def _plan(train: str, infer: str, reference: str | None = None, infer_tp: int = 1):
    roles = [RoleRequest("actor_train", train), RoleRequest("actor_infer", infer, tp=infer_tp)]
    if reference:
        roles.append(RoleRequest("reference", reference))
    return make_plan(PlanInput(get_model_spec("qwen2.5-0.5b"), num_gpus=4, roles=roles))


def _probe_class():
    """Defined in a function so Ray ships the class by value to its workers."""

    class Probe:
        def __init__(self, args: None) -> None:
            pass

        def where(self) -> dict:
            import os

            import ray

            ctx = ray.get_runtime_context()
            return {
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "gpu_ids": [str(g) for g in ctx.get_accelerator_ids()["GPU"]],
                "resources": ctx.get_assigned_resources(),
                "pg": ctx.get_placement_group_id(),
            }

    return Probe


def _cluster(role: str, placement: DevicePlacement) -> list[dict]:
    where = placement.for_role(role)
    probe = _probe_class()
    cluster = Cluster(
        role, probe, len(where), WorkerResources(), lambda rank: None, placement=where
    )
    try:
        return cluster.call(probe.where)
    finally:
        cluster.kill()


def _bundles() -> dict[int, dict]:
    import ray

    tables = [t for t in ray.util.placement_group_table().values() if t["state"] == "CREATED"]
    assert len(tables) == 1  # one node: one group
    return tables[0]["bundles"]


def test_separate_roles_get_bundles_and_gpus_of_their_own(placements) -> None:
    plan = _plan("0-1", "2-3")
    assert plan.mode == "separate"
    placement = DevicePlacement.build(plan, cpus_per_gpu=0.5)
    placements(placement)
    assert _bundles() == {i: {"GPU": 1.0, "CPU": 0.5} for i in range(4)}
    train, infer = _cluster("actor_train", placement), _cluster("actor_infer", placement)
    gpus = [r["gpu_ids"] for r in train + infer]
    assert all(len(g) == 1 for g in gpus)
    assert len({g[0] for g in gpus}) == 4  # four ranks, four different GPUs
    for rank in train + infer:  # a whole GPU and its bundle's CPU each
        assert rank["resources"]["GPU"] == pytest.approx(1.0)
        assert rank["resources"]["CPU"] == pytest.approx(0.5)
    assert [w.bundle_index for w in placement.for_role("actor_train")] == [0, 1]
    assert [w.bundle_index for w in placement.for_role("actor_infer")] == [2, 3]


def test_colocated_roles_share_each_gpu_with_fractional_shares(placements) -> None:
    plan = _plan("0-3", "0-3", reference="0-3")
    assert plan.mode == "colocated"
    placement = DevicePlacement.build(plan, cpus_per_gpu=0.5)
    placements(placement)
    assert _bundles() == {i: {"GPU": 1.0, "CPU": 0.5} for i in range(4)}
    ranks = {role: _cluster(role, placement) for role in ("actor_train", "actor_infer")}
    ranks["reference"] = _cluster("reference", placement)
    for rank in range(4):  # rank i of every role is on the same GPU, a third of it each
        ids = {role: ranks[role][rank]["gpu_ids"] for role in ranks}
        assert ids["actor_train"] == ids["actor_infer"] == ids["reference"], ids
        for role in ranks:
            assert ranks[role][rank]["resources"]["GPU"] == pytest.approx(0.3333)
    assert len({tuple(r["gpu_ids"]) for r in ranks["actor_train"]}) == 4
    # every actor ran inside the plan's placement group
    assert {r["pg"] for rs in ranks.values() for r in rs} == {placement.groups[0].id.hex()}


def test_a_tensor_parallel_engine_holds_and_sees_its_group(placements) -> None:
    """actor_infer tp=2 beside actor_train on GPUs 0-3: each engine rank sees the two GPUs
    of its group (those of train ranks 0-1, then 2-3), and its holds take its share of
    both, so Ray's books show every GPU of the group taken (before: only the first)."""
    import ray

    plan = _plan("0-3", "0-3", infer_tp=2)
    placement = DevicePlacement.build(plan, cpus_per_gpu=0.5)
    placements(placement)
    assert _bundles() == {i: {"GPU": 1.0, "CPU": 0.5} for i in range(4)}
    train, infer = _cluster("actor_train", placement), _cluster("actor_infer", placement)
    train_ids = [r["gpu_ids"][0] for r in train]
    assert [r["visible"] for r in train] == train_ids  # Ray's own: one GPU each
    assert [r["visible"] for r in infer] == [",".join(train_ids[:2]), ",".join(train_ids[2:])]
    for rank in infer:  # its GPUs are the holds'; it keeps its bundle's CPU share
        assert rank["gpu_ids"] == [] and "GPU" not in rank["resources"]
        assert rank["resources"]["CPU"] == pytest.approx(0.25)
    assert len(placement.holds) == 4  # a half of each GPU, two per engine
    # with the test's clusters gone, the holds still take the engines' half of every GPU
    pg = placement.groups[0].id.hex()
    free = _wait_for(
        lambda: [ray.available_resources().get(f"GPU_group_{i}_{pg}") for i in range(4)], [0.5] * 4
    )
    assert free == [0.5] * 4


def _wait_for(read, want, timeout_s: float = 10.0):  # noqa: ANN001, ANN202
    """`read()` once it equals `want` (Ray's resource view lags its actors), else its last."""
    import time

    deadline = time.monotonic() + timeout_s
    while (got := read()) != want and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_rank_slots_follow_the_plan() -> None:
    plan = _plan("0-1", "0-3", infer_tp=2)  # actor_infer: two tp=2 engines
    slots = {(s.role, s.rank): s for s in rank_slots(plan)}
    assert role_world_sizes(plan) == {"actor_train": 2, "actor_infer": 2}
    assert slots["actor_infer", 0].gpus == (0, 1) and slots["actor_infer", 1].gpus == (2, 3)
    # GPUs 0-1 are shared by two roles, GPUs 2-3 hold only actor_infer's second engine
    assert slots["actor_train", 1].gpu_share == 0.5
    assert slots["actor_infer", 0].gpu_share == 0.5
    assert slots["actor_infer", 1].gpu_share == 1.0


def test_a_cpu_plan_places_nothing() -> None:
    plan = make_plan(
        PlanInput(
            get_model_spec("tiny-random"), num_gpus=0, roles=[RoleRequest("actor_train", "cpu")]
        )
    )
    assert plan.mode == "cpu" and rank_slots(plan) == []
    assert DevicePlacement.build(plan) is None


def test_a_plan_bigger_than_the_cluster_is_refused_and_leaves_no_group() -> None:
    import ray

    plan = _plan("0-1", "2-3")
    with pytest.raises(PlacementError, match="could not reserve 4 GPU bundle"):
        DevicePlacement(plan, cpus_per_gpu=4.0, timeout_s=2)  # 16 CPUs wanted, 2 here
    assert not [t for t in ray.util.placement_group_table().values() if t["state"] != "REMOVED"]

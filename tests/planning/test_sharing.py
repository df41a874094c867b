"""GPUs grouped by the roles on them (planning/sharing.py) give the plan a per-GPU walk
would: the same roles and peak on every GPU, the same rank shares, idle GPUs and gaps."""

from __future__ import annotations

from rollcli.models.registry import get_model_spec
from rollcli.planning import PlanInput, RoleRequest, gpu_memory, make_plan
from rollcli.planning.planner import _gpu_plan
from rollcli.planning.ranks import rank_slots, role_gpu_shares
from rollcli.planning.render import _grouped


def _plan():  # noqa: ANN202
    roles = [
        RoleRequest("actor_train", "0-3,6,7", zero_stage=3, strategy="deepspeed"),
        RoleRequest("actor_infer", "0-3", tp=2),
        RoleRequest("reference", [0, 1, 2, 3, 6, 7]),
    ]
    inp = PlanInput(
        get_model_spec("qwen2.5-0.5b"), 10, gpu_memory_bytes=gpu_memory("l4"), roles=roles
    )
    return make_plan(inp)


def test_each_gpu_has_the_roles_and_peak_of_a_per_gpu_walk() -> None:
    plan = _plan()
    assert [d.id for d in plan.devices] == list(range(10))  # no role on the host
    for device in plan.devices:  # the loop the groups replace
        roles = [r for r, where in plan.placements.items() if where != "cpu" and device.id in where]
        assert device.roles == roles
        expected = _gpu_plan(device.id, roles, plan.role_memory, gpu_memory("l4"))
        assert (device.memory_bytes, device.peak_role) == (
            expected.memory_bytes,
            expected.peak_role,
        )
    assert "GPU(s) 4-5,8-9 have no role" in plan.notes


def test_rank_shares_match_the_slots_and_rows_split_at_gaps() -> None:
    plan = _plan()
    slots: dict[str, list[float]] = {}
    for slot in rank_slots(plan):
        slots.setdefault(slot.role, []).append(slot.gpu_share)
    assert role_gpu_shares(plan) == slots
    assert slots["actor_infer"] == [0.3333, 0.3333]  # one rank per tp=2 group on 3 roles
    assert slots["actor_train"] == [0.3333] * 4 + [0.5] * 2
    rows = [label for label, _ in _grouped(plan)]
    assert rows == ["GPU 0-3", "GPU 4-5", "GPU 6-7", "GPU 8-9"]

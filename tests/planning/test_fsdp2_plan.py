"""`roll plan` with train.strategy fsdp2: every model state divided by the data-parallel
ranks (ZeRO-3's split), fp32 shards as the master weights with fp32 gradients, the
whole-response logits its log-probs come from, its CPU offload moving all three states (the
update still peaks 2 bytes/param on the GPU); what FSDP2 cannot run is refused with one line."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.models.registry import get_model_spec, param_count
from rollcli.planning import PlanInput, RoleRequest, make_plan
from rollcli.planning.devices import PlanError
from rollcli.planning.from_recipe import plan_recipe

GiB = 1024**3


def _train_memory(**req):  # noqa: ANN003, ANN202
    spec = get_model_spec("qwen2.5-7b")
    role = RoleRequest("actor_train", "0-7", strategy="fsdp2", **req)
    plan = make_plan(PlanInput(spec, 8, gpu_memory_bytes=80 * GiB, roles=[role]))
    return plan, plan.role_memory["actor_train"], param_count(spec)


def test_bf16_mixed_states_per_rank_by_hand() -> None:
    plan, memory, psi = _train_memory(param_bytes=2)
    # fp32 shards (the master weights, 4 bytes) + fp32 gradients reduce-scattered into them
    # (4) + Adam's m and v (8), each over the 8 ranks: 16Ψ/8 = 15.2 GB for 7.6B parameters
    states = memory.active
    assert states.weights == pytest.approx(4 * psi / 8, abs=1)
    assert states.grads == pytest.approx(4 * psi / 8, abs=1)
    assert states.optimizer == pytest.approx(8 * psi / 8, abs=1)
    assert 14.1 * GiB < states.weights + states.grads + states.optimizer < 14.3 * GiB
    assert plan.layouts["actor_train"] == "fsdp2 dp=8"
    fp32 = _train_memory(param_bytes=4)[1].active
    assert (fp32.weights, fp32.grads, fp32.optimizer) == (
        states.weights,
        states.grads,
        states.optimizer,
    )


def test_cpu_offload_moves_weights_gradients_and_optimizer_states() -> None:
    plan, memory, psi = _train_memory(offload_params=True)
    states = memory.active
    # still on the GPU during the update: 2 bytes/param over the ranks, counted as the fp32
    # gradient shards on their way to host memory (measured on an H100 and an H200,
    # docs/gpu.md); host memory keeps all 16 bytes/param
    assert (states.weights, states.optimizer) == (0, 0)
    assert states.grads == pytest.approx(2 * psi / 8, abs=1)
    assert memory.host_bytes == pytest.approx(16 * psi / 8, abs=3)
    assert plan.layouts["actor_train"] == "fsdp2 dp=8 offload-params"


def test_gpu_updates_count_the_whole_response_logits() -> None:
    """FSDP2's log-probs come from the model's own logits: 20 bytes per scored position and
    vocabulary entry (bf16 output, a bf16 copy, four fp32 copies kept for the backward) where
    ZeRO-3, otherwise the same ranks and shapes, counts one fp32 copy."""
    from rollcli.planning.role_memory import forward_shape

    spec = get_model_spec("qwen2.5-7b")
    fsdp2 = _train_memory(param_bytes=2)[1].active.activations
    role = RoleRequest("actor_train", "0-7", strategy="deepspeed", zero_stage=3, param_bytes=2)
    plan = make_plan(PlanInput(spec, 8, gpu_memory_bytes=80 * GiB, roles=[role]))
    zero3 = plan.role_memory["actor_train"].active.activations
    scored = forward_shape(role, budget_applies=False).scored
    assert fsdp2 - zero3 == pytest.approx(16 * scored * spec.vocab_size, abs=1)


def test_lora_shards_the_frozen_base_and_the_adapters() -> None:
    adapters = 10_000_000
    _, memory, psi = _train_memory(param_bytes=2, lora_params=adapters)
    states = memory.active
    # bf16 frozen base (2 bytes) and fp32 adapters (4 + 4 grads + 8 Adam), all over 8 ranks
    assert states.weights == pytest.approx((2 * psi + 4 * adapters) / 8, abs=2)
    assert states.grads == 4 * adapters // 8
    assert states.optimizer == 8 * adapters // 8


def test_a_recipe_plans_fsdp2_on_gpus() -> None:
    cfg, _ = load_recipe(
        "rlvr-math", ["model=qwen2.5-7b", "train.strategy=fsdp2"], {"resources.gpus": 8}
    )
    plan = plan_recipe(cfg)
    psi = param_count(get_model_spec("qwen2.5-7b"))
    states = plan.role_memory["actor_train"].active
    assert states.weights + states.grads + states.optimizer == pytest.approx(16 * psi / 8, abs=3)
    assert plan.layouts["actor_train"].startswith("fsdp2")


@pytest.mark.parametrize(
    ("overrides", "gpus", "message"),
    [
        (["devices.actor_train.zero_stage=2"], 8, "fsdp2 always shards weights"),
        (["devices.actor_train.offload_optimizer=true"], 8, "set devices.actor_train.offload_p"),
        (["devices.actor_train.tp=2"], 8, "fsdp2 is data parallel only here"),
        (["devices.actor_train.offload_params=true"], 0, "this is a CPU run"),
        (["train.strategy=fsdp2", "train.lora.r=8"], 0, None),  # LoRA is allowed
    ],
)
def test_what_fsdp2_cannot_run_is_refused_in_one_line(overrides, gpus, message) -> None:
    overrides = ["train.strategy=fsdp2", *overrides]
    if message is None:
        load_recipe("rlvr-math", overrides, {"resources.gpus": gpus})
        return
    with pytest.raises(ConfigError, match=message) as err:
        load_recipe("rlvr-math", overrides, {"resources.gpus": gpus})
    assert "\n" not in str(err.value)


def test_the_planner_refuses_the_same_layouts() -> None:
    spec = get_model_spec("qwen2.5-0.5b")
    role = RoleRequest("actor_train", "0-1", strategy="fsdp2", zero_stage=1)
    with pytest.raises(PlanError, match="fsdp2 always shards"):
        make_plan(PlanInput(spec, 2, roles=[role]))


def test_host_memory_of_a_node_is_judged_where_given() -> None:
    """The run the kit could not finish (docs/gpu.md, run 5): qwen2.5-7b with FSDP2 offload
    on one GPU of a 128 GiB host. The node needs its ranks' offloaded states (16 bytes/param
    of actor_train, the sleeping engine's weights) and every GPU process's own host memory;
    without the node's RAM that is a note."""
    from rollcli.planning.memory import GPU_PROCESS_HOST_BYTES

    keys = ["train.strategy=fsdp2", "devices.actor_train.offload_params=true"]
    flags = {"model": "qwen2.5-7b", "resources.gpus": 1}
    cfg, _ = load_recipe("rlvr-math", keys, flags)
    plan = plan_recipe(cfg, gpu_kind="h200")
    memory = plan.role_memory
    psi = param_count(get_model_spec("qwen2.5-7b"))
    assert memory["actor_train"].host_bytes == pytest.approx(16 * psi, abs=3)
    assert memory["actor_infer"].host_bytes == pytest.approx(2 * psi, rel=0.01)  # bf16 weights
    # train, infer and reference share GPU 0: three processes on the node
    need = memory["actor_train"].host_bytes + memory["actor_infer"].host_bytes
    need += 3 * GPU_PROCESS_HOST_BYTES
    assert plan.fits
    note = f"take up to {need / GiB:.1f} GiB of host memory per node (not judged"
    assert note in " ".join(plan.notes)
    small, _ = load_recipe("rlvr-math", keys, {**flags, "devices.host_mem_gib": 128})
    refused = plan_recipe(small, gpu_kind="h200")
    assert not refused.fits
    assert f"node 0 needs {need / GiB:.1f} GiB of host memory" in refused.problems[-1]
    assert "has 128.0 GiB" in refused.problems[-1]
    big, _ = load_recipe("rlvr-math", keys, {**flags, "devices.host_mem_gib": 256})
    assert plan_recipe(big, gpu_kind="h200").fits

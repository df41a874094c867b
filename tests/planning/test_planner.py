import subprocess
import sys

import pytest

from rollcli.models.registry import get_model_spec, param_count
from rollcli.planning import PlanError, PlanInput, RoleRequest, gpu_memory, make_plan
from rollcli.planning.memory import CPU_DRIVER_BYTES, CPU_PROCESS_BYTES

GiB = 1024**3
H100 = gpu_memory("h100-80g")


def rlvr_roles(mapping="0-7", **train):
    return [
        RoleRequest("actor_train", mapping, zero_stage=3, micro_batch=2, seq_len=4096, **train),
        RoleRequest("actor_infer", mapping, tp=2, seq_len=4096, gpu_memory_utilization=0.55),
        RoleRequest("reference", mapping, micro_batch=4, seq_len=4096),
    ]


def test_qwen25_7b_on_8_h100_fits_colocated():
    plan = make_plan(
        PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=rlvr_roles())
    )
    assert plan.fits and plan.mode == "colocated" and plan.advice == []
    assert [d.id for d in plan.devices] == list(range(8))
    assert all(d.roles == ["actor_train", "actor_infer", "reference"] for d in plan.devices)


def test_colocated_peak_is_the_heaviest_phase():
    # Nothing offloads while idle, so every phase carries the others' resident states.
    roles = [
        RoleRequest("actor_train", "0-7", zero_stage=3, offload_when_idle=False),
        RoleRequest(
            "actor_infer", "0-7", tp=2, gpu_memory_utilization=0.4, offload_when_idle=False
        ),
    ]
    plan = make_plan(PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=roles))
    train, infer = plan.role_memory["actor_train"], plan.role_memory["actor_infer"]
    psi = param_count(get_model_spec("qwen2.5-7b"))
    # ZeRO-3 states (DeepSpeed bf16: 2 + 2 + 12 + 4 fp32 gradients), no activations
    assert train.idle.total == pytest.approx(20 * psi / 8, abs=3)
    assert infer.idle.total == infer.active.total == int(0.4 * H100)  # weights + reserved KV
    train_phase = train.active.total + infer.idle.total
    generate_phase = infer.active.total + train.idle.total
    assert plan.devices[0].memory_bytes["total"] == max(train_phase, generate_phase)
    assert plan.devices[0].peak_role == "actor_train"


def test_separate_mode_and_async():
    roles = [
        RoleRequest("actor_train", "0-3", zero_stage=2, seq_len=4096),
        RoleRequest("actor_infer", "4-7", seq_len=4096, gpu_memory_utilization=0.9),
    ]
    inp = PlanInput(
        get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=roles, async_mode=True
    )
    plan = make_plan(inp)
    assert plan.mode == "separate" and plan.fits
    infer = plan.devices[4].memory_bytes
    assert infer["total"] == int(0.9 * H100)
    assert infer["kv_cache"] == int(0.9 * H100) - 2 * param_count(get_model_spec("qwen2.5-7b"))


def test_qwen3_30b_a3b_on_16_gpus():
    roles = [
        RoleRequest("actor_train", "0-15", zero_stage=3, seq_len=8192),
        RoleRequest("actor_infer", "0-15", tp=4, seq_len=8192),
        RoleRequest("reference", "0-15", tp=2, seq_len=8192),
    ]
    plan = make_plan(
        PlanInput(
            get_model_spec("qwen3-30b-a3b"), 16, num_nodes=2, gpu_memory_bytes=H100, roles=roles
        )
    )
    assert len(plan.devices) == 16 and plan.mode == "colocated"
    # MoE weights count every expert: 2 bytes × ~30.5B / tp 4.
    assert plan.role_memory["actor_infer"].active.weights == pytest.approx(2 * 30.5e9 / 4, rel=0.01)


def test_72b_full_finetune_on_one_gpu_does_not_fit():
    roles = [
        RoleRequest("actor_train", "0", micro_batch=4, seq_len=4096, grad_checkpointing=False),
        RoleRequest("actor_infer", "0", seq_len=4096),
    ]
    plan = make_plan(
        PlanInput(get_model_spec("qwen2.5-72b"), 1, gpu_memory_bytes=H100, roles=roles)
    )
    assert not plan.fits and plan.problems
    assert plan.advice
    assert "actor_train.offload_optimizer=true" in plan.advice[0]
    assert any("--gpus" in line for line in plan.advice)


def test_advice_raises_zero_stage_first():
    roles = [
        RoleRequest("actor_train", "0-7", zero_stage=0, seq_len=2048),
        RoleRequest("actor_infer", "0-7", tp=1, seq_len=2048, gpu_memory_utilization=0.5),
    ]
    plan = make_plan(
        PlanInput(
            get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=gpu_memory("a100-40g"), roles=roles
        )
    )
    assert not plan.fits
    assert "`devices.actor_train.zero_stage=3`" in plan.advice[0]
    assert plan.advice[-1].endswith("fits")


def test_advice_for_resident_colocated_neighbours():
    # The reference keeps its weights on the GPU while vLLM claims 95% of it; a reference
    # cannot leave its GPU when idle (offload_when_idle changes nothing for it), so the
    # advice is never to set it: the ladder lowers gpu_memory_utilization, to the highest
    # 0.05 step under (79.6 GiB − 14.2 GiB reference weights) / 79.6 GiB ≈ 0.82.
    for offload in (False, True):
        roles = [
            RoleRequest("actor_infer", "0-7", tp=2, gpu_memory_utilization=0.95),
            RoleRequest("reference", "0-7", offload_when_idle=offload),
        ]
        inp = PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=roles)
        plan = make_plan(inp)
        assert not plan.fits
        assert plan.role_memory["reference"].idle.weights > 0
        assert plan.advice == [
            "leave room for colocated roles: `devices.actor_infer.gpu_memory_utilization=0.8` → fits"
        ]


def test_to_json_keys():
    plan = make_plan(
        PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=rlvr_roles())
    )
    data = plan.to_json()
    assert set(data) == {"mode", "fits", "devices", "workers", "advice"}
    assert data["workers"] == []  # a recipe's plan lists them (`plan_recipe`)
    for device in data["devices"]:
        assert set(device) == {"id", "roles", "memory_bytes", "capacity_bytes"}
        keys = {"weights", "grads", "optimizer", "activations", "kv_cache", "runtime", "total"}
        assert set(device["memory_bytes"]) == keys
        memory = device["memory_bytes"]
        assert memory["total"] == sum(memory[k] for k in keys - {"total"})


def test_cpu_plan():
    roles = [
        RoleRequest("actor_train", "cpu", strategy="hf", param_bytes=4, micro_batch=2, seq_len=512),
        RoleRequest(
            "actor_infer", "0-7", strategy="hf", param_bytes=4, max_num_seqs=16, seq_len=512
        ),
    ]
    small = make_plan(
        PlanInput(get_model_spec("smollm2-135m"), 0, roles=roles, host_memory_bytes=16 * GiB)
    )
    assert small.mode == "cpu" and small.fits
    assert [d.id for d in small.devices] == ["cpu"] and small.devices[0].capacity_bytes == 16 * GiB
    host = small.devices[0].memory_bytes
    train, infer = small.role_memory["actor_train"].active, small.role_memory["actor_infer"].active
    # processes on the host do not offload; the driver process is there too
    assert host["total"] == train.total + infer.total + CPU_DRIVER_BYTES
    assert train.runtime == infer.runtime == CPU_PROCESS_BYTES  # each role is a process
    big = make_plan(
        PlanInput(get_model_spec("qwen2.5-7b"), 0, roles=roles, host_memory_bytes=16 * GiB)
    )
    assert not big.fits and big.advice


@pytest.mark.parametrize(
    ("roles", "message"),
    [
        ([RoleRequest("actor_train", "0-8")], "actor_train.device_mapping: .*uses GPU 8"),
        ([RoleRequest("actor_train", "")], "is empty"),
        ([RoleRequest("actor_infer", "0-5", tp=4)], "tp=4 × pp=1 = 4 does not divide its 6"),
        (
            [RoleRequest("actor_infer", "0-5", tp=3)],
            "does not divide qwen2.5-7b's 28 attention heads",
        ),
        ([RoleRequest("actor_train", "cpu")], "give it GPUs"),
        ([RoleRequest("critc", "0-7")], "unknown role 'critc'"),
        ([RoleRequest("actor_train", "0-3"), RoleRequest("actor_train", "4-7")], "given twice"),
        ([RoleRequest("actor_train", "0-7", zero_stage=2, offload_params=True)], "zero_stage 3"),
        (
            [RoleRequest("actor_train", "0-7", strategy="hf", zero_stage=2)],
            "needs strategy deepspeed",
        ),
        ([RoleRequest("actor_infer", "0-7", gpu_memory_utilization=1.5)], r"fraction in \(0, 1\]"),
        ([], "no roles"),
    ],
)
def test_plan_errors(roles, message):
    with pytest.raises(PlanError, match=message):
        make_plan(PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=roles))


def test_async_mode_rejects_colocated_actor():
    inp = PlanInput(get_model_spec("qwen2.5-7b"), 8, roles=rlvr_roles("0-7"), async_mode=True)
    with pytest.raises(PlanError, match="share GPU\\(s\\) 0-7; give them disjoint"):
        make_plan(inp)


def test_cluster_shape_errors():
    with pytest.raises(PlanError, match="not 8 GPUs"):
        make_plan(
            PlanInput(
                get_model_spec("qwen2.5-7b"), 8, num_nodes=2, gpus_per_node=8, roles=rlvr_roles()
            )
        )


def test_tp_group_across_nodes_is_noted():
    roles = [RoleRequest("actor_infer", "2-5", tp=4)]
    plan = make_plan(PlanInput(get_model_spec("qwen2.5-7b"), 8, num_nodes=2, roles=roles))
    assert any("spans nodes" in n for n in plan.notes)
    assert any("0-1,6-7 have no role" in n for n in plan.notes)


def test_planning_imports_no_torch_or_ray():
    code = (
        "import sys, rollcli.planning, rollcli.planning.render, rollcli.planning.advice; "
        "bad = [m for m in ('torch', 'ray') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_engine_sleeps_only_where_it_shares_a_gpu_with_training():
    from rollcli.planning.role_memory import infer_sleeps_while_training

    def sleeps(infer_gpus: str, offload: bool = True) -> bool:
        roles = [
            RoleRequest("actor_train", "0-3", zero_stage=3),
            RoleRequest("actor_infer", infer_gpus, offload_when_idle=offload),
        ]
        plan = make_plan(
            PlanInput(get_model_spec("qwen2.5-7b"), 8, gpu_memory_bytes=H100, roles=roles)
        )
        return infer_sleeps_while_training(plan.placements, offload)

    assert sleeps("0-3")  # colocated: the engine leaves the GPU while training runs
    assert sleeps("2-5")  # shares GPUs 2 and 3
    assert not sleeps("4-7")  # separate GPUs: nothing to free
    assert not sleeps("0-3", offload=False)  # the user keeps it resident

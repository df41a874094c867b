"""Memory formulas against arithmetic written out by hand."""

import pytest

from rollcli.models.registry import get_model_spec, param_count
from rollcli.planning.inference_memory import inference_memory, kv_cache_bytes_per_token
from rollcli.planning.memory import (
    MemoryBreakdown,
    activation_bytes,
    layer_activation_bytes,
    logits_bytes,
    model_state_bytes,
)

GiB = 1024**3
PSI = 7_000_000_000  # a round 7B so every division below is exact


def test_zero_stages_match_the_zero_paper():
    # Mixed-precision Adam: 2Ψ weights + 2Ψ grads + K=12 Ψ optimizer states, N = 8.
    n = 8
    stage0 = model_state_bytes(PSI, dp=n, zero_stage=0)
    assert (stage0.weights, stage0.grads, stage0.optimizer) == (2 * PSI, 2 * PSI, 12 * PSI)
    assert stage0.total == 16 * PSI == 112_000_000_000
    stage1 = model_state_bytes(PSI, dp=n, zero_stage=1)
    assert stage1.total == 2 * PSI + 2 * PSI + 12 * PSI // n == 38_500_000_000
    stage2 = model_state_bytes(PSI, dp=n, zero_stage=2)
    assert stage2.total == 2 * PSI + (2 + 12) * PSI // n == 26_250_000_000
    stage3 = model_state_bytes(PSI, dp=n, zero_stage=3)
    assert stage3.total == (2 + 2 + 12) * PSI // n == 14_000_000_000


def test_zero3_for_qwen25_7b_on_8_gpus():
    psi = param_count(get_model_spec("qwen2.5-7b"))
    states = model_state_bytes(psi, dp=8, zero_stage=3)
    assert states.total == pytest.approx((2 + 2 + 12) * psi / 8, abs=2)
    assert 14.1 * GiB < states.total < 14.3 * GiB  # ≈ 16 × 7.62e9 / 8 bytes


def test_tensor_and_pipeline_parallel_divide_the_shard():
    # Ψ' = Ψ / (t·p) = 7e9 / (2·2); stage 1 over N = 2: 2Ψ' + 2Ψ' + 12Ψ'/2.
    states = model_state_bytes(PSI, dp=2, zero_stage=1, tp=2, pp=2)
    shard = PSI // 4
    assert states.total == 2 * shard + 2 * shard + 12 * shard // 2


def test_offload():
    # Stage 2 + optimizer offload: only the 2Ψ weights stay on the GPU.
    assert model_state_bytes(PSI, dp=8, zero_stage=2, offload_optimizer=True) == MemoryBreakdown(
        weights=2 * PSI
    )
    # Stage 1 keeps its unpartitioned gradients on the GPU.
    stage1 = model_state_bytes(PSI, dp=8, zero_stage=1, offload_optimizer=True)
    assert (stage1.weights, stage1.grads, stage1.optimizer) == (2 * PSI, 2 * PSI, 0)
    # Stage 3 + both offloads: nothing resident.
    both = model_state_bytes(PSI, dp=8, zero_stage=3, offload_optimizer=True, offload_params=True)
    assert both.total == 0


def test_fp32_training_has_no_master_copy():
    # 4Ψ weights + 4Ψ grads + 8Ψ (m, v) = 16Ψ, no sharding at stage 0.
    states = model_state_bytes(PSI, dp=1, zero_stage=0, param_bytes=4)
    assert (states.weights, states.grads, states.optimizer) == (4 * PSI, 4 * PSI, 8 * PSI)


def test_kv_cache_for_qwen25_7b():
    spec = get_model_spec("qwen2.5-7b")  # 28 layers, 4 KV heads, head_dim 128
    assert kv_cache_bytes_per_token(spec) == 2 * 28 * 4 * 128 * 2 == 57_344
    assert kv_cache_bytes_per_token(spec, tp=2) == 2 * 28 * 2 * 128 * 2
    assert kv_cache_bytes_per_token(spec, tp=8) == 2 * 28 * 1 * 128 * 2  # heads replicated
    inf = inference_memory(
        spec, capacity_bytes=80 * GiB, gpu_memory_utilization=0.9, max_num_seqs=256, max_len=4096
    )
    weights = 2 * param_count(spec)
    assert inf.weights == weights
    assert inf.kv_reserved == int(0.9 * 80 * GiB) - weights
    assert inf.kv_needed == 256 * 4096 * 57_344 == 56 * GiB
    assert inf.kv_per_sequence == 4096 * 57_344
    assert inf.sequences_in_cache == inf.kv_reserved // (4096 * 57_344)


def test_kv_reservation_never_negative():
    spec = get_model_spec("qwen2.5-72b")
    inf = inference_memory(
        spec, capacity_bytes=80 * GiB, gpu_memory_utilization=0.9, max_num_seqs=8, max_len=1024
    )
    assert inf.kv_reserved == 0 and inf.sequences_in_cache == 0


def test_activations_for_qwen25_7b():
    spec = get_model_spec("qwen2.5-7b")  # h 3584, 28 heads × 128, 4 KV heads, I 18944
    tokens = 2 * 4096
    per_layer = 2 * tokens * (4 * 3584 + 2 * 28 * 128 + 2 * 4 * 128 + 3 * 18944)
    assert layer_activation_bytes(spec, tokens=tokens) == per_layer
    logits = 4 * tokens * 152_064
    assert logits_bytes(spec, tokens=tokens) == logits
    full = activation_bytes(spec, micro_batch=2, seq_len=4096, grad_checkpointing=False)
    assert full == 28 * per_layer + logits
    ckpt = activation_bytes(spec, micro_batch=2, seq_len=4096, grad_checkpointing=True)
    assert ckpt == 28 * 2 * tokens * 3584 + per_layer + logits
    assert ckpt < full / 4


def test_moe_activations_use_active_experts():
    spec = get_model_spec("qwen3-30b-a3b")  # 8 of 128 experts, moe_intermediate 768
    per_token = 4 * 2048 + 2 * 32 * 128 + 2 * 4 * 128 + 3 * 8 * 768
    assert layer_activation_bytes(spec, tokens=1) == 2 * per_token


def test_hf_engine_memory_counts_the_decode_buffer_the_prefill_cache_and_the_logits():
    from rollcli.planning.inference_memory import hf_engine_memory

    spec = get_model_spec("qwen2.5-7b")
    mem = hf_engine_memory(spec, max_num_seqs=256, seq_len=512, prompt_len=256)
    kv_token = 2 * 28 * 4 * 128 * 2  # K and V, 28 layers, 4 KV heads of 128, bf16
    assert mem.weights == 2 * param_count(spec)
    assert mem.kv_cache == 256 * (512 + 256) * kv_token  # 10.5 GiB: measured 26.4 in all
    assert mem.activations == 3 * 256 * spec.vocab_size * 4


def test_deepspeed_bf16_counts_its_fp32_gradients_and_hf_does_not():
    from rollcli.planning.request import RoleRequest
    from rollcli.planning.role_memory import estimate_role

    spec = get_model_spec("qwen2.5-1.5b")
    psi = param_count(spec)

    def states(strategy: str, stage: int) -> int:
        req = RoleRequest("actor_train", "0-3", strategy=strategy, zero_stage=stage)
        active = estimate_role(
            req, spec, ranks=4, capacity_bytes=None, on_cpu=False, colocated=False
        ).active
        return active.weights + active.grads + active.optimizer

    from rollcli.models.spec import decoder_linear_params

    # hf: 16 bytes/param and autocast's bf16 copies of the linear weights (the test below)
    assert states("hf", 0) == pytest.approx(16 * psi + 2 * decoder_linear_params(spec), abs=4)
    assert states("deepspeed", 2) == pytest.approx(2 * psi + (2 + 12 + 4) * psi / 4, abs=4)
    assert states("deepspeed", 3) == pytest.approx(20 * psi / 4, abs=4)


def test_hf_bf16_mixed_counts_autocasts_bf16_copies_of_the_linear_weights():
    """The hf strategy trains fp32 weights under autocast, whose cast cache holds a bf16 copy
    of every decoder linear weight (an H200's allocation history: 13.1 GB for qwen2.5-7b);
    DeepSpeed's bf16 mode and fp32 training cast nothing."""
    from rollcli.models.spec import decoder_linear_params
    from rollcli.planning import PlanInput, RoleRequest, make_plan

    spec = get_model_spec("qwen2.5-7b")
    # 28 layers x (q, o: 3584 x 3584; k, v: 3584 x 512; gate, up, down: 3584 x 18944)
    by_hand = 28 * (2 * 3584 * 3584 + 2 * 3584 * 512 + 3 * 3584 * 18944)
    assert decoder_linear_params(spec) == by_hand == 6_525_288_448

    def weights(strategy: str, param_bytes: int) -> int:
        role = RoleRequest("actor_train", "0", strategy=strategy, param_bytes=param_bytes)
        plan = make_plan(PlanInput(spec, 1, gpu_memory_bytes=200 * 2**30, roles=[role]))
        return plan.role_memory["actor_train"].active.weights

    psi = param_count(spec)
    assert weights("hf", 2) == pytest.approx(2 * psi + 2 * by_hand, abs=2)
    assert weights("deepspeed", 2) == pytest.approx(2 * psi, abs=1)
    assert weights("hf", 4) == pytest.approx(4 * psi, abs=1)

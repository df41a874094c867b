"""The planner's numbers of MoE models read from their config.json: Mixtral, Qwen2-MoE and
Qwen3-MoE, each checked against the model transformers builds from that config."""

from __future__ import annotations

import torch
from transformers import (
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from rollcli.models.spec import active_param_count, param_count
from rollcli.planning.lora_params import lora_param_count
from rollcli.planning.model_spec import spec_from_config

# vocabulary 256, hidden 64, 4 heads (2 key/value), head_dim 16 unless stated; untied
COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    tie_word_embeddings=False,
)
ATTENTION = 2 * 64 * 64 + 2 * 64 * 32  # q, o: 64x64; k, v: 64x32
NORMS = 2 * 64  # two per layer
EMBED = 2 * 256 * 64 + 64  # embeddings, LM head, final norm


def _real(model_class, config) -> tuple[int, object]:
    with torch.device("meta"):  # the shapes without the memory
        model = model_class(config)
    spec = spec_from_config(config.to_dict(), name="m")
    return sum(p.numel() for p in model.parameters()), spec


def test_mixtral_experts_are_intermediate_size_wide():
    config = MixtralConfig(
        **COMMON, num_hidden_layers=2, intermediate_size=96, num_local_experts=4,
        num_experts_per_tok=2, head_dim=16,
    )  # fmt: skip
    n, spec = _real(MixtralForCausalLM, config)
    assert (spec.num_experts, spec.moe_intermediate_size, spec.num_dense_layers) == (4, 96, 0)
    assert param_count(spec) == n
    expert, router = 3 * 64 * 96, 64 * 4
    assert n == 2 * (ATTENTION + NORMS + router + 4 * expert) + EMBED
    assert active_param_count(spec) == 2 * (ATTENTION + NORMS + router + 2 * expert) + EMBED


def test_qwen2_moe_counts_the_shared_expert_and_its_dense_layers():
    # layer i is sparse where (i + 1) % 2 == 0 and i is not in mlp_only_layers: layer 1 only
    config = Qwen2MoeConfig(
        **COMMON, num_hidden_layers=4, intermediate_size=128, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2,
        decoder_sparse_step=2, mlp_only_layers=[3],
    )  # fmt: skip
    n, spec = _real(Qwen2MoeForCausalLM, config)
    assert (spec.num_dense_layers, spec.shared_expert_intermediate_size) == (3, 48)
    # the planner leaves out qwen2's q/k/v biases: 4 layers x (64 + 32 + 32)
    assert n - param_count(spec) == 4 * 128
    dense, expert, router = 3 * 64 * 128, 3 * 64 * 32, 64 * 4
    shared = 3 * 64 * 48 + 64  # the shared expert and its 1-output gate
    sparse_active = router + 2 * expert + shared
    assert active_param_count(spec) == 4 * (ATTENTION + NORMS) + 3 * dense + sparse_active + EMBED
    assert param_count(spec) - active_param_count(spec) == 2 * expert  # 2 of 4 experts idle


def test_qwen3_moe_with_a_dense_first_layer():
    config = Qwen3MoeConfig(
        **COMMON, num_hidden_layers=2, head_dim=32, intermediate_size=128,
        moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, norm_topk_prob=True,
        mlp_only_layers=[0],
    )  # fmt: skip
    n, spec = _real(Qwen3MoeForCausalLM, config)
    assert (spec.head_dim, spec.num_dense_layers) == (32, 1)
    # the planner leaves out Qwen3's q/k norms: 2 layers x 2 x head_dim
    assert n - param_count(spec) == 2 * 2 * 32
    attention = 2 * 64 * 128 + 2 * 64 * 64  # q, o: 64x128; k, v: 64x64
    dense, expert, router = 3 * 64 * 128, 3 * 64 * 32, 64 * 8
    active = 2 * (attention + NORMS) + dense + router + 2 * expert + EMBED
    assert active_param_count(spec) == active


def test_a_dense_config_is_not_moe():
    spec = spec_from_config({**COMMON, "num_hidden_layers": 2, "intermediate_size": 96}, name="d")
    assert (spec.num_experts, spec.num_dense_layers) == (0, 0)
    assert active_param_count(spec) == param_count(spec)


def test_lora_counts_the_dense_layers_the_shared_expert_and_the_experts():
    config = Qwen2MoeConfig(
        **COMMON, num_hidden_layers=4, intermediate_size=128, moe_intermediate_size=32,
        shared_expert_intermediate_size=48, num_experts=4, num_experts_per_tok=2,
        decoder_sparse_step=2, mlp_only_layers=[3],
    )  # fmt: skip
    spec = spec_from_config(config.to_dict(), name="m")
    # down_proj: 3 dense layers (128 wide) and the shared expert of sparse layer 1; its 4
    # experts' adapters whatever the targets (gate_up_proj 64 -> 2 x 32, down_proj 32 -> 64)
    r = 8
    assert lora_param_count(spec, r=r, target_modules=("down_proj",)) == r * (
        3 * (128 + 64) + (48 + 64) + 4 * ((64 + 2 * 32) + (32 + 64))
    )


def test_docstring_examples():
    import doctest

    from rollcli.models import spec
    from rollcli.planning import model_spec

    for module in (spec, model_spec):
        assert doctest.testmod(module).failed == 0

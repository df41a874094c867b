"""`tiny-random-moe`: the smallest MoE of the registry, built from its numbers like `tiny-random`."""

from __future__ import annotations

from transformers import AutoModelForCausalLM

from rollcli.models.loading import resolve_model
from rollcli.models.registry import get_model_spec
from rollcli.models.spec import param_count


def test_tiny_random_moe_is_a_qwen3_moe_of_the_registry_numbers():
    spec = get_model_spec("tiny-random-moe")
    model = AutoModelForCausalLM.from_pretrained(resolve_model(spec.name))
    config = model.config
    assert type(model).__name__ == "Qwen3MoeForCausalLM"
    assert (config.num_experts, config.num_experts_per_tok) == (4, 2)
    assert config.norm_topk_prob  # like Qwen3-30B-A3B: the top-k weights renormalised
    # the registry's count leaves out Qwen3's q/k norms (2 layers x 2 x head_dim)
    n = sum(p.numel() for p in model.parameters())
    assert n - param_count(spec) == spec.num_layers * 2 * spec.head_dim

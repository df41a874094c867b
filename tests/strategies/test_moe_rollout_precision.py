"""A low-precision hf rollout of an MoE model (tiny-random-moe: 2 layers, 4 experts, top-2).
bf16: each experts module computes with bf16 copies of all its parameters, as the linears
do (strategies/bf16_linears.py), its router in fp32; the engine samples near the fp32 model
and a weight sync re-casts the copies. int8 (linears only) is refused before a run starts."""

from __future__ import annotations

import copy

import pytest
import torch
from error_text import error_message
from rollout_gaps import engine_gaps, synced_gaps

from rollcli.strategies.bf16_linears import Bf16Linears, experts_modules
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.int8_linears import Int8Linears

# as test_bf16_rollout.py's for tiny-random (measured here: 0.0032 at most, 0.0010 on average)
TOLERANCE = 0.02
MEAN_TOLERANCE = 0.004


def test_the_bf16_copies_cover_every_parameter_of_the_experts(tiny_moe_model) -> None:
    model = load_causal_lm(tiny_moe_model)
    copies = Bf16Linears(model)
    experts = experts_modules(model)
    assert len(experts) == 2  # one per layer
    for module in experts:
        own = dict(module.named_parameters(recurse=False))
        bf16 = copies.expert_copies[id(module)]
        assert bf16.keys() == own.keys() == {"gate_up_proj", "down_proj"}
        for name, p in own.items():
            assert p.dtype == torch.float32 and torch.equal(bf16[name], p.bfloat16()), name
    # every matrix but the routers is copied (the embedding is the tied LM head's, a linear)
    covered = {id(m.weight) for m in copies.linears} | {
        id(p) for m in experts for p in m.parameters(recurse=False)
    }
    left = {n for n, p in model.named_parameters() if p.ndim >= 2 and id(p) not in covered}
    assert left == {f"model.layers.{i}.mlp.gate.weight" for i in (0, 1)}
    experts_bytes = sum(2 * p.numel() for m in experts for p in m.parameters(recurse=False))
    assert copies.nbytes() == experts_bytes + sum(2 * m.weight.numel() for m in copies.linears)


def test_an_experts_module_computes_its_bf16_forward(tiny_moe_model) -> None:
    """The module's output is transformers' forward on bf16 weights and hidden states."""
    model = load_causal_lm(tiny_moe_model)
    module = model.model.layers[0].mlp.experts
    reference = copy.deepcopy(module).to(torch.bfloat16)
    torch.manual_seed(0)
    hidden = torch.randn(6, 128)
    index = torch.tensor([[0, 1], [2, 3], [1, 3], [0, 2], [3, 0], [1, 2]])
    weights = torch.softmax(torch.randn(6, 2), dim=-1)
    exact = module(hidden, index, weights)
    Bf16Linears(model)
    out = module(hidden, index, weights)
    assert out.dtype == torch.float32
    assert torch.equal(out, reference(hidden.bfloat16(), index, weights).float())
    assert not torch.equal(out, exact) and torch.allclose(out, exact, atol=0.05, rtol=0.05)


def test_the_moe_engine_samples_near_fp32(tiny_moe_model) -> None:
    gap = engine_gaps(str(tiny_moe_model), bf16=True).abs()
    assert gap.max() < TOLERANCE and gap.mean() < MEAN_TOLERANCE
    assert gap.max() > 1e-6  # its own numbers: bf16 products, not the fp32 model's


def test_a_weight_sync_re_casts_the_experts_copies(tiny_moe_model) -> None:
    new_gap, old_gap = synced_gaps(str(tiny_moe_model), bf16_linears=True)
    assert 1e-4 < new_gap < TOLERANCE
    assert old_gap > 10 * new_gap  # stale expert copies would sample from `old`


def test_int8_is_refused_on_an_moe_model_before_anything_starts(tiny_moe_model, tmp_path):
    from roll_in_process import cli

    code, err = cli(
        "train", "rlvr-math", "--model", "tiny-random-moe", "rollout.precision=int8",
        "--runs-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 2
    assert error_message(err) == (
        "error: rollout.precision int8 on tiny-random-moe, an MoE model (4 experts): the hf "
        "engine's int8 copies cover its linears only, and the experts would sample in fp32; "
        "set rollout.precision: bf16 (its copies cover the experts) or fp32"
    )
    assert not any(tmp_path.iterdir())  # no run was started
    with pytest.raises(ValueError, match="leave an MoE model's experts"):
        Int8Linears(load_causal_lm(tiny_moe_model))


def test_int8_is_refused_on_a_mixtral_folder_too(tmp_path) -> None:
    """A Mixtral's config.json counts its experts as `num_local_experts`, each a whole MLP."""
    import json

    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe
    from rollcli.planning.from_recipe import recipe_plan_input
    from rollcli.planning.model_spec import model_spec

    config = {
        "model_type": "mixtral", "num_hidden_layers": 2, "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
        "vocab_size": 1000, "num_local_experts": 4, "num_experts_per_tok": 2,
    }  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(config))
    spec = model_spec(str(tmp_path))
    assert (spec.num_experts, spec.moe_intermediate_size) == (4, 128)
    cfg, _ = load_recipe("rlvr-math", [f"model={tmp_path}", "rollout.precision=int8"])
    with pytest.raises(ConfigError, match="an MoE model \\(4 experts\\)"):
        recipe_plan_input(cfg)

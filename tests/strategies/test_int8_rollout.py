"""`rollout.precision: int8`: the hf engine computes its linears with int8 copies of the
weights (rollcli/strategies/int8_linears.py). Its log-probs are its own (not the fp32
trainer's) and stay within a stated tolerance of them; a real weight sync re-packs the
copies; the plan refuses int8 where no engine runs it."""

from __future__ import annotations

import pytest
import torch
from rollout_gaps import PROMPTS, SAMPLE, engine_gaps, synced_gaps
from rollout_gaps import gaps as _gaps

from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.int8_linears import int8_linear, pack

# |int8 log-prob - fp32 log-prob| per sampled token on tiny-random: at most this (measured
# 0.011), and this on average (measured 0.003); smollm2-135m: docs/performance.md
TOLERANCE = 0.05
MEAN_TOLERANCE = 0.01


@pytest.mark.parametrize("rows", [5, 40])  # fewer than _int_mm's 17 rows: padded
def test_a_row_quantized_linear_is_within_its_rounding_of_fp32(rows) -> None:
    """Each weight moves by at most half its row's step (max|w_i| / 127), each activation
    by half its row's (max|x| / 127): the product's error is bounded by both."""
    torch.manual_seed(0)
    w, b, x = torch.randn(48, 32), torch.randn(48), torch.randn(rows, 32)
    out = int8_linear(x, pack(w, b))
    ref = torch.nn.functional.linear(x, w, b)
    dw = w.abs().amax(dim=1) / 254  # [out]
    dx = x.abs().amax(dim=1, keepdim=True) / 254  # [rows, 1]
    bound = dw * x.abs().sum(1, keepdim=True) + dx * w.abs().sum(1) + 32 * dx * dw
    assert out.shape == (rows, 48)
    assert torch.all((out - ref).abs() <= bound + 1e-5)
    assert not torch.equal(out, ref)


def test_the_int8_engine_reports_its_own_logprobs_close_to_fp32(tiny_model) -> None:
    gap = engine_gaps(str(tiny_model), int8=True).abs()
    assert gap.max() < TOLERANCE and gap.mean() < MEAN_TOLERANCE
    assert gap.max() > 1e-6  # its own numbers: int8 logits, not the fp32 trainer's


def test_a_weight_sync_re_packs_the_int8_copies(tiny_model) -> None:
    """After a real sync into the worker, the engine samples from the new weights: its
    log-probs are within the tolerance of the new fp32 model's, far from the old one's."""
    new_gap, old_gap = synced_gaps(str(tiny_model), int8=True)
    assert new_gap < TOLERANCE  # 0.014 measured: the perturbed weights' logits are larger
    assert old_gap > 10 * new_gap  # stale copies would sample from `old`


@pytest.mark.parametrize(
    ("overrides", "gpus", "message"),
    [
        (["rollout.engine=vllm"], 0, "rollout.precision int8 with rollout.engine vllm"),
        (["rollout.engine=hf"], 1, "rollout.precision int8 on GPUs"),
        (["rollout.precision=fp8"], 1, "rollout.precision fp8: no engine of this build"),
    ],
)
def test_a_precision_no_engine_runs_is_refused(overrides, gpus, message) -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe
    from rollcli.planning.from_recipe import recipe_plan_input

    cfg, _ = load_recipe("rlvr-math", ["rollout.precision=int8", *overrides])
    with pytest.raises(ConfigError, match=message):
        recipe_plan_input(cfg, gpus=gpus, gpu_mem_gib=80 if gpus else None)


def test_vllm_dtype_is_refused_with_its_new_spelling() -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe

    with pytest.raises(ConfigError, match="rollout.vllm_dtype is now rollout.precision"):
        load_recipe("rlvr-math", ["rollout.vllm_dtype=bfloat16"])
    cfg, _ = load_recipe("rlvr-math", ["rollout.vllm_dtype=auto"])  # a saved run's default
    assert cfg.rollout.precision == "auto"


def test_siblings_share_one_product_with_the_numbers_of_each_alone(tiny_model) -> None:
    """q/k/v (and gate/up) stack into one int8 product; per row the scales are the same
    as each linear's own, so every member's output equals its product alone, exactly."""
    from rollcli.strategies.int8_linears import Int8Linears

    model = load_causal_lm(str(tiny_model), train=False)
    int8 = Int8Linears(model)
    assert sorted(len(g.linears) for g in int8.groups)[-2:] == [3, 3]  # q/k/v of each layer
    attn = model.model.layers[0].self_attn
    x = torch.randn(2, 5, attn.q_proj.in_features)
    for linear in (attn.q_proj, attn.k_proj, attn.v_proj):  # as the model calls them
        alone = int8_linear(x, pack(linear.weight, linear.bias))
        assert torch.equal(linear(x), alone)
    group = next(g for g in int8.groups if attn.q_proj in g.linears)
    assert group.input is None  # every member took its part: the input is let go


def test_smoothing_moves_an_outlier_channels_range_into_the_weights() -> None:
    """One input channel 50x the others coarsens every row's step; smoothed (SmoothQuant,
    s_j = sqrt(max|x_j| / max|W_j|)) the same product is several times closer to fp32."""
    torch.manual_seed(0)
    w, x = torch.randn(48, 32), torch.randn(40, 32)
    x[:, 3] *= 50
    ref = torch.nn.functional.linear(x, w)
    plain = (int8_linear(x, pack(w, None)) - ref).abs().mean()
    packed = pack(w, None, x.abs().amax(dim=0))
    expected = (x.abs().amax(dim=0) / w.abs().amax(dim=0)).sqrt()
    assert torch.allclose(1 / packed.inverse, expected, rtol=1e-5)
    smoothed = (int8_linear(x, packed) - ref).abs().mean()
    assert smoothed < plain / 3


def test_int8_products_record_each_input_channels_largest_magnitude() -> None:
    torch.manual_seed(0)
    w, a, b = torch.randn(24, 16), torch.randn(20, 16), torch.randn(3, 16)
    seen = torch.zeros(16)
    int8_linear(a, pack(w, None), seen)
    assert torch.equal(seen, a.abs().amax(dim=0))
    int8_linear(b, pack(w, None, seen.clone()), seen)  # smoothed: still |x|, not |x / s|
    assert torch.allclose(seen, torch.maximum(a.abs().amax(0), b.abs().amax(0)), rtol=1e-6)


def _with_outlier_channels(model, factor: float = 30.0) -> None:
    """The same fp32 function with outlier activations: each layer's norm weights scale
    channel 0 by `factor` and the linears reading them divide their column 0 by it."""
    with torch.no_grad():
        for layer in model.model.layers:
            layer.input_layernorm.weight[0] *= factor
            layer.post_attention_layernorm.weight[0] *= factor
            for linear in (
                layer.self_attn.q_proj,
                layer.self_attn.k_proj,
                layer.self_attn.v_proj,
                layer.mlp.gate_proj,
                layer.mlp.up_proj,
            ):
                linear.weight[:, 0] /= factor


def test_the_engine_smooths_with_the_inputs_its_first_call_saw(tiny_model) -> None:
    """The first `generate` runs per-row int8 and records; from then on (and after a
    weight sync) the copies are smoothed, which recovers most of an outlier's damage."""
    tok = load_tokenizer(str(tiny_model))
    fp32 = load_causal_lm(str(tiny_model), train=False)
    _with_outlier_channels(fp32)
    model = load_causal_lm(str(tiny_model), train=False)
    _with_outlier_channels(model)
    engine = HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id, int8=True)
    assert not engine.int8.smoothed
    first = _gaps(fp32, engine.generate(PROMPTS, SAMPLE)).abs().mean()
    assert engine.int8.smoothed
    second = _gaps(fp32, engine.generate(PROMPTS, SAMPLE)).abs().mean()
    assert second < first / 2
    engine.requantize()  # as after a weight sync: still smoothed by what it saw
    assert engine.int8.smoothed

"""`rollout.precision: bf16` on a CPU: the hf engine computes its linears with bf16 copies of
its fp32 weights (rollcli/strategies/bf16_linears.py). A linear's output is the bf16 product
of its rounded input and weight; the engine's log-probs are its own and within a stated
tolerance of the fp32 model's; the weights keep their fp32 values and names; a real weight
sync re-casts the copies; the plan hands the engine an fp32 model with the copies and counts
their bytes."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from rollout_gaps import engine_gaps, synced_gaps

from rollcli.strategies.bf16_linears import Bf16Linears

# |bf16-linears log-prob - fp32 log-prob| per sampled token on tiny-random: at most this
# (measured 0.0025), and this on average (measured 0.0008)
TOLERANCE = 0.02
MEAN_TOLERANCE = 0.004


def test_a_linear_computes_the_bf16_product_and_hands_on_fp32() -> None:
    torch.manual_seed(0)
    linear = torch.nn.Linear(32, 48)
    x = torch.randn(5, 32)
    exact = linear(x)
    copies = Bf16Linears(torch.nn.Sequential(linear))
    out = linear(x)
    bf16 = torch.nn.functional.linear(
        x.bfloat16(), linear.weight.bfloat16(), linear.bias.bfloat16()
    ).float()
    assert out.dtype == torch.float32 and torch.equal(out, bf16)
    assert not torch.equal(out, exact) and torch.allclose(out, exact, atol=0.05, rtol=0.02)
    assert linear.weight.dtype == torch.float32  # the master stays fp32
    assert copies.nbytes() == 2 * (32 * 48 + 48)


def test_the_engine_samples_near_fp32_and_leaves_the_weights_alone(tiny_model) -> None:
    gap = engine_gaps(str(tiny_model), bf16=True).abs()
    assert gap.max() < TOLERANCE and gap.mean() < MEAN_TOLERANCE
    assert gap.max() > 1e-6  # its own numbers: bf16 products, not the fp32 model's


def test_a_weight_sync_re_casts_the_bf16_copies(tiny_model) -> None:
    """After a real sync into the worker, the engine samples from the new weights."""
    new_gap, old_gap = synced_gaps(str(tiny_model), bf16_linears=True)
    assert 1e-4 < new_gap < TOLERANCE  # bf16 numbers of the new weights (fp32: 4e-7)
    assert old_gap > 10 * new_gap  # stale copies would sample from `old`


def test_the_plan_gives_a_cpu_engine_fp32_weights_and_bf16_copies(tiny_model) -> None:
    """`rollout.precision: bf16` on a CPU plan: the hf engine loads fp32 (param bytes 4)
    and holds bf16 copies, which the plan counts at 2 bytes per parameter; on GPUs bf16
    stays the engine's dtype (no copies)."""
    from rollcli.config.loader import load_recipe
    from rollcli.models.registry import param_count
    from rollcli.planning.from_recipe import model_spec, recipe_plan_input
    from rollcli.planning.role_memory import estimate_role
    from rollcli.planning.run_plan import plan_run
    from rollcli.runtime.role_args import role_args

    cfg, _ = load_recipe("rlvr-math", ["model=tiny-random", "rollout.precision=bf16"])
    inp = recipe_plan_input(cfg)
    infer = {r.role: r for r in inp.roles}["actor_infer"]
    args = role_args(cfg, inp, plan_run(cfg).plan).infer
    assert infer.param_bytes == 4 and infer.bf16_copies and not infer.int8_copies
    assert args.dtype == "float32" and args.bf16_linears is True
    spec = model_spec(str(tiny_model))
    kw = {"ranks": 1, "capacity_bytes": None, "on_cpu": True, "colocated": False}
    with_copies = estimate_role(infer, spec, **kw).active
    without = estimate_role(replace(infer, bf16_copies=False), spec, **kw).active
    assert with_copies.weights - without.weights == math.ceil(2 * param_count(spec))
    gpu, _ = load_recipe(
        "rlvr-math", ["model=qwen2.5-0.5b", "resources.gpus=8", "rollout.precision=bf16"]
    )
    on_gpus = {r.role: r for r in recipe_plan_input(gpu).roles}["actor_infer"]
    assert on_gpus.param_bytes == 2 and not on_gpus.bf16_copies

"""`roll plan` with LoRA: adapter counts, frozen-weight memory, no reference role, advice."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.models.registry import get_model_spec, param_count
from rollcli.models.spec import decoder_linear_params
from rollcli.planning import PlanInput, RoleRequest, make_plan
from rollcli.planning.from_recipe import plan_recipe, recipe_plan_input
from rollcli.planning.lora_params import lora_param_count

GiB = 1024**3


def test_adapter_count_is_r_times_in_plus_out_per_adapted_linear() -> None:
    spec = get_model_spec("qwen2.5-7b")  # h 3584, 28 heads and 4 KV heads of 128, I 18944
    h, q, kv, inter = 3584, 28 * 128, 4 * 128, 18944
    attn = (h + q) + (h + kv) + (h + kv) + (q + h)
    mlp = 2 * (h + inter) + (inter + h)
    assert lora_param_count(spec, r=8, target_modules=("q_proj", "k_proj", "v_proj", "o_proj")) == (
        28 * 8 * attn
    )
    assert lora_param_count(spec, r=16, target_modules="all-linear") == 28 * 16 * (attn + mlp)
    with pytest.raises(ValueError, match="cannot plan LoRA on 'c_attn'"):
        lora_param_count(spec, r=8, target_modules=("c_attn",))


def test_lora_training_memory_is_frozen_weights_plus_adapter_states() -> None:
    spec = get_model_spec("qwen2.5-7b")
    adapters = 10_000_000
    full, lora = (
        make_plan(
            PlanInput(
                spec,
                1,
                gpu_memory_bytes=80 * GiB,
                roles=[RoleRequest("actor_train", "0", strategy="hf", lora_params=n)],
            )
        )
        .role_memory["actor_train"]
        .active
        for n in (0, adapters)
    )
    psi = param_count(spec)
    copies = 2 * decoder_linear_params(spec)  # autocast's bf16 copies (full training only)
    assert (full.weights, full.grads, full.optimizer) == (2 * psi + copies, 2 * psi, 12 * psi)
    # bf16: frozen weights 2 bytes each; adapters' weights 2 + grads 2 + Adam (fp32) 12
    assert (lora.weights, lora.grads, lora.optimizer) == (
        2 * psi + 2 * adapters,
        2 * adapters,
        12 * adapters,
    )
    assert lora.activations == full.activations


def test_a_lora_recipe_plans_no_reference_role_and_fits_a_7b_on_one_80gb_gpu() -> None:
    full, _ = load_recipe("rlvr-math", ["model=qwen2.5-7b"])
    lora, _ = load_recipe("rlvr-math-lora", ["model=qwen2.5-7b"])
    assert full.reference_role == "reference" and lora.reference_role == "actor_train"
    roles = [r.role for r in recipe_plan_input(lora, gpus=1, gpu_mem_gib=80).roles]
    assert roles == ["actor_train", "actor_infer", "reward"]
    assert plan_recipe(lora, gpus=1, gpu_mem_gib=80).fits
    plan = plan_recipe(full, gpus=1, gpu_mem_gib=80)
    assert not plan.fits
    assert "`train.lora.r=16`" in plan.advice[0] and "adapters off" in plan.advice[0]
    assert plan.advice[0].endswith("→ fits")


def test_dpo_with_lora_has_no_reference_and_distill_keeps_its_teacher() -> None:
    dpo, _ = load_recipe("dpo", ["train.lora.r=8"])
    assert [r.role for r in recipe_plan_input(dpo).roles] == ["actor_train"]
    distill, _ = load_recipe("distill", ["train.lora.r=8"])
    assert distill.reference_role is None
    assert [r.role for r in recipe_plan_input(distill).roles] == ["actor_train", "teacher"]


def test_lora_config_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match="train.lora runs on train.strategy=hf"):
        load_recipe("rlvr-math-lora", ["train.strategy=deepspeed"])
    with pytest.raises(ConfigError, match="train.lora.target_modules is empty"):
        load_recipe("rlvr-math-lora", ["train.lora.target_modules=[]"])
    with pytest.raises(ConfigError, match="did you mean 'train.lora.alpha'"):
        load_recipe("rlvr-math-lora", ["train.lora.alpah=4"])
    cfg, _ = load_recipe("rlvr-math", ["model=qwen2.5-7b", "train.lora.target_modules=[c_attn]"])
    with pytest.raises(ConfigError, match="train.lora.target_modules: cannot plan LoRA"):
        recipe_plan_input(cfg, gpus=1)

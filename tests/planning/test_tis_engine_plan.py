"""`algorithm.off_policy.correction` needs the sampler's log-probs under the trainer's distribution: the
plan refuses top-k / top-p with the engines that report truncated log-probs."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import plan_recipe

TIS = ["algorithm.off_policy.correction=tis", "rollout.top_p=0.9"]


def test_vllm_with_top_p_and_a_correction_is_one_config_error() -> None:
    cfg, _ = load_recipe("rlvr-math", [*TIS, "rollout.engine=vllm"])
    with pytest.raises(
        ConfigError, match="algorithm.off_policy.correction tis with rollout.top_p = 0.9"
    ):
        plan_recipe(cfg, gpus=1, gpu_mem_gib=80)


def test_the_hf_engine_and_untruncated_vllm_plan() -> None:
    hf, _ = load_recipe("rlvr-math", [*TIS, "rollout.engine=hf"])
    plan_recipe(hf, gpus=1, gpu_mem_gib=80)
    vllm, _ = load_recipe(
        "rlvr-math", ["algorithm.off_policy.correction=tis", "rollout.engine=vllm"]
    )
    plan_recipe(vllm, gpus=1, gpu_mem_gib=80)


def test_topr_reads_the_samplers_log_probs_so_vllm_with_top_p_is_refused() -> None:
    """TOPR's ratio is to `mu` whatever the correction: the same bias, the same refusal."""
    topr = ["algorithm.name=topr", "rollout.top_p=0.9"]
    cfg, _ = load_recipe("rlvr-math", [*topr, "rollout.engine=vllm"])
    with pytest.raises(ConfigError, match="algorithm.policy_loss topr with rollout.top_p = 0.9"):
        plan_recipe(cfg, gpus=1, gpu_mem_gib=80)
    hf, _ = load_recipe("rlvr-math", [*topr, "rollout.engine=hf"])
    plan_recipe(hf, gpus=1, gpu_mem_gib=80)

"""The advice proposes tensor parallel inference only for an engine that runs it (vllm,
sglang): a user who follows it gets a recipe that loads and a run that splits the engine,
not an hf engine holding the whole model on each GPU (config/parallel.py). Plan-level."""

from __future__ import annotations

import pytest

from rollcli.config.loader import load_recipe
from rollcli.models.registry import get_model_spec
from rollcli.planning import PlanInput, RoleRequest, gpu_memory, make_plan
from rollcli.planning.from_recipe import plan_recipe


@pytest.mark.parametrize(("engine", "proposed"), [("hf", False), ("vllm", True), ("sglang", True)])
def test_tp_advice_follows_the_engine(engine: str, proposed: bool) -> None:
    overrides = [f"rollout.engine={engine}"]
    cfg, _ = load_recipe("rlvr-math", overrides, {"model": "qwen2.5-72b", "resources.gpus": 2})
    plan = plan_recipe(cfg)
    assert not plan.fits
    tp = [line for line in plan.advice if "`devices.actor_infer.tp=" in line]
    assert bool(tp) is proposed, plan.advice
    if proposed:  # and the recipe it proposes loads
        load_recipe("rlvr-math", [*overrides, "devices.actor_infer.tp=2"], {"resources.gpus": 2})


@pytest.mark.parametrize("strategy", ["hf", "vllm"])
def test_more_gpus_widen_tp_only_where_it_runs(strategy: str) -> None:
    roles = [
        RoleRequest("actor_train", "0", micro_batch=4, seq_len=4096, grad_checkpointing=False),
        RoleRequest("actor_infer", "0", seq_len=4096, strategy=strategy),
    ]
    h100 = gpu_memory("h100-80g")
    plan = make_plan(
        PlanInput(get_model_spec("qwen2.5-72b"), 1, gpu_memory_bytes=h100, roles=roles)
    )
    assert not plan.fits
    lines = [line for line in plan.advice if "actor_infer.tp=" in line]
    if strategy == "vllm":
        assert lines == [
            "use 4 GPUs: `--gpus 4` with `devices.actor_train.device_mapping='0-3'`, "
            "`devices.actor_infer.device_mapping='0-3'`, `devices.actor_infer.tp=4` → fits"
        ]
    else:  # 145 GB of bf16 weights on every hf engine rank: no GPU count helps
        assert lines == [] and plan.advice[-1].startswith("qwen2.5-72b does not fit")

"""`devices.actor_infer.tp` reaches the vLLM and SGLang engines: from the recipe through the
plan (one rank per tp GPUs), the workers' arguments (`role_args`, `worker_args`) and the
actor_infer worker to the engine's constructor. vllm and sglang are fakes at the import
boundary (neither is needed here, nor a GPU): the test reads the keyword arguments that
`vllm.LLM(...)` and `sglang.Engine(...)` receive."""

from __future__ import annotations

import importlib.machinery
import pickle
import sys
import types
from dataclasses import replace

import pytest
import torch

from rollcli.config import engines as infer_engines
from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import plan_recipe, recipe_plan_input
from rollcli.planning.ranks import rank_slots
from rollcli.runtime.role_args import role_args
from rollcli.runtime.worker_table import BuildContext, worker_args
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker


class FakeLLM:
    """`vllm.LLM`: records its keyword arguments and each `collective_rpc`."""

    made: list[FakeLLM] = []

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        self.rpcs: list[tuple[str, dict]] = []
        FakeLLM.made.append(self)

    def collective_rpc(self, method: str, kwargs: dict) -> None:
        if self.kwargs["tensor_parallel_size"] > 1:  # to worker processes: must pickle
            pickle.dumps(kwargs)
        self.rpcs.append((method, {**kwargs, "weights_iterator": list(kwargs["weights_iterator"])}))

    def reset_prefix_cache(self) -> bool:
        return True


class FakeEngine:
    """`sglang.Engine`: records its keyword arguments."""

    made: list[FakeEngine] = []

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs
        FakeEngine.made.append(self)


def _fake_module(monkeypatch: pytest.MonkeyPatch, name: str, **attrs) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # found by find_spec
    for key, value in attrs.items():
        setattr(module, key, value)
    monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> list[FakeLLM]:
    FakeLLM.made = []
    _fake_module(monkeypatch, "vllm", LLM=FakeLLM)
    monkeypatch.setattr(infer_engines, "vllm_available", lambda: True)
    return FakeLLM.made


@pytest.fixture
def fake_sglang(monkeypatch: pytest.MonkeyPatch) -> list[FakeEngine]:
    FakeEngine.made = []
    _fake_module(monkeypatch, "sglang", Engine=FakeEngine)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # sglang's GPU check
    return FakeEngine.made


def _actor_infer_args(overrides: list[str], tiny_model) -> tuple[ActorInferArgs, object]:
    """The first actor_infer worker's args object in an 8-GPU run of qwen2.5-7b
    (the plan's), with the tiny model's folder (what the worker loads here)."""
    cfg, _ = load_recipe(
        "rlvr-math",
        [*overrides, "devices.actor_infer.gpu_memory_utilization=0.5"],
        {"model": "qwen2.5-7b", "resources.gpus": 8},
    )
    plan = plan_recipe(cfg)
    args = role_args(cfg, recipe_plan_input(cfg), plan)
    sizes = {w.role: w for w in plan.workers}
    ctx = BuildContext(cfg, args, str(tiny_model), None, sizes)
    return worker_args(ctx, "actor_infer", 0), plan


def test_vllm_gets_its_tensor_parallel_size(fake_vllm) -> None:
    from rollcli.strategies.vllm_infer import VLLMInferEngine

    VLLMInferEngine("model", [0], tp=2, dtype="bfloat16")
    VLLMInferEngine("model", [0])
    two, one = (llm.kwargs for llm in fake_vllm)
    assert (two["tensor_parallel_size"], two["distributed_executor_backend"]) == (2, "mp")
    assert (one["tensor_parallel_size"], one["distributed_executor_backend"]) == (1, None)


def test_a_tp_engine_receives_weights_a_layer_at_a_time(fake_vllm) -> None:
    from rollcli.strategies.vllm_infer import VLLMInferEngine

    names = ["model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
             "model.layers.0.self_attn.k_proj.weight", "model.layers.1.mlp.up_proj.weight",
             "model.norm.weight"]  # fmt: skip
    t = torch.ones(2)
    VLLMInferEngine("model", [0], tp=2).load_weights((n, t) for n in names)  # a stream
    calls = fake_vllm[0].rpcs
    assert {method for method, _ in calls} == {"reload_weights"}
    assert [[n for n, _ in kw["weights_iterator"]] for _, kw in calls] == [
        names[:1], names[1:3], names[3:4], names[4:]
    ]  # fmt: skip
    VLLMInferEngine("model", [0]).load_weights((n, t) for n in names)  # in-process: one call
    assert len(fake_vllm[1].rpcs) == 1
    import doctest

    import rollcli.strategies.vllm_infer

    assert doctest.testmod(rollcli.strategies.vllm_infer).failed == 0  # layer_chunks


def test_the_recipes_tp_reaches_the_vllm_engine(fake_vllm, tiny_model) -> None:
    args, plan = _actor_infer_args(["rollout.engine=vllm", "devices.actor_infer.tp=2"], tiny_model)
    # one rank per tp group: four engines on GPUs (0, 1), (2, 3), ...
    assert [s.gpus for s in rank_slots(plan) if s.role == "actor_infer"] == [
        (0, 1), (2, 3), (4, 5), (6, 7)
    ]  # fmt: skip
    assert args.engine == "vllm" and args.engine_options.tp == 2
    ActorInferWorker(replace(args, num_gpus=0))  # the CPU here: its model stays on meta
    (llm,) = fake_vllm
    assert llm.kwargs["tensor_parallel_size"] == 2
    assert llm.kwargs["distributed_executor_backend"] == "mp"
    assert llm.kwargs["dtype"] == "bfloat16"
    assert llm.kwargs["kv_cache_memory_bytes"] == int(args.engine_options.kv_cache_gib * 2**30)


def test_the_recipes_tp_reaches_the_sglang_engine(fake_sglang, tiny_model) -> None:
    args, plan = _actor_infer_args(
        ["rollout.engine=sglang", "devices.actor_infer.tp=4"], tiny_model
    )
    assert [s.gpus for s in rank_slots(plan) if s.role == "actor_infer"] == [
        (0, 1, 2, 3), (4, 5, 6, 7)
    ]  # fmt: skip
    ActorInferWorker(replace(args, num_gpus=0))
    (engine,) = fake_sglang
    assert engine.kwargs["tp_size"] == 4
    assert engine.kwargs["dtype"] == "bfloat16"
    assert engine.kwargs["mem_fraction_static"] == 0.5

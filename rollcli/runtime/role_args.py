"""The plan's decisions as the workers' arguments: one pure function, no Ray, no torch.

`roll plan` judges a run by modelling each role: its dtype (`param_bytes`: bf16 with fp32
master weights on GPUs, fp32 on the CPU), its strategy and ZeRO/offload layout, the
inference engine and its KV-cache reservation, and which idle roles leave their GPU.
`role_args` turns that same request (`recipe_plan_input`) and plan (the run's `RunPlan`,
planning/run_plan.py) into `PlannedArgs`, the typed decisions that the worker table
(`worker_table.py`) puts into each role's args object, so what runs is what the plan
judged; the test in tests/planning/test_plan_reaches_workers.py checks every decision
against them.

What each decision becomes:
- training precision: the plan's name for it (`RoleRequest.precision`, never rebuilt from
  its bytes): `bf16-mixed` (2 bytes/param in the plan) or `fp32` (4).
  The hf trainer keeps fp32 weights and Adam states and runs forward/backward under bf16
  autocast (16 bytes/param, the plan's 2 + 2 + 12); DeepSpeed turns on its `bf16` mode,
  which holds bf16 weights and gradients and fp32 master weights in the optimizer.
- inference dtype: the reference's and the hf engine's weights, and vLLM's `dtype`.
- the critic's micro-batch: its value forwards and updates run `critic.micro_batch_size`
  rows at a time, the size its memory was planned for (not `train.micro_batch_size`).
- engine: the plan's `actor_infer` strategy, which resolves `rollout.engine: auto` the way
  the run does (`config.engines.resolve_engine`).
- tensor parallel inference: `devices.actor_infer.tp` becomes the vllm / sglang engine's
  `tp` (its `tensor_parallel_size` / `tp_size`); each rank drives `tp` GPUs, which the
  placement holds for it (`distributed/placement.py`). A tp / pp a strategy does not run
  was refused when the recipe loaded (`config/parallel.py`).
- the engine's memory on GPUs: vLLM reserves the KV cache the plan computed (not the CPU
  key `rollout.vllm_kv_cache_gib`), for `max_num_seqs` sequences of `seq_len` tokens.
- the hf engine's decode batch on GPUs: it decodes `max_num_seqs` samples at a time, the
  count its KV buffer and logits were planned for (`decode_batch`; on the CPU the engine's
  own 64, which the plan already assumes: `planning.inference_memory.hf_decode_seqs`).
- idle offload: only actor_infer's vllm/sglang engine leaves a shared GPU when idle
  (`sleep_mode`); training and forward roles keep their states on the GPU, and the plan
  counts them there (`planning.role_memory.leaves_gpu_when_idle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollcli.config.precision_spec import FP32
from rollcli.config.recipe import rollout_of
from rollcli.config.roles import ACTOR_INFER
from rollcli.config.strategy_spec import ENGINES
from rollcli.planning.role_memory import infer_sleeps_while_training
from rollcli.strategies.engine_options import EngineOptions, SglangOptions, VllmOptions
from rollcli.strategies.train_engines import TrainStrategy

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.planner import Plan
    from rollcli.planning.request import PlanInput, RoleRequest

GiB = 1 << 30
DTYPES = {2: "bfloat16", 4: "float32"}  # the plan's param_bytes -> torch dtype name


def dtype_name(param_bytes: int) -> str:
    """>>> dtype_name(2), dtype_name(4)
    ('bfloat16', 'float32')
    """
    return DTYPES[param_bytes]


@dataclass(frozen=True)
class PlannedInfer:
    """actor_infer as planned: its engine, the vllm / sglang engine's options (None: the hf
    engine), the weights' dtype, the CPU hf engine's int8 or bf16 copies and, on GPUs, the
    hf engine's decode batch (None: its own)."""

    engine: str
    options: EngineOptions | None
    dtype: str
    int8: bool = False
    bf16_linears: bool = False
    decode_batch: int | None = None

    @property
    def sleeps(self) -> bool:
        """The engine sleeps while training runs on the GPU it shares."""
        return bool(self.options is not None and self.options.sleep_mode)


@dataclass(frozen=True)
class PlannedArgs:
    """The plan's decisions for each model role (None: the recipe runs no such role):
    actor_train's strategy and precision, actor_infer's engine, the reference's dtype, the
    critic's micro-batch."""

    strategy: TrainStrategy
    precision: str
    infer: PlannedInfer | None = None
    reference_dtype: str | None = None
    critic_micro_batch: int | None = None


def role_args(cfg: RecipeConfig, inp: PlanInput, plan: Plan) -> PlannedArgs:
    """The plan's decisions for the model roles of `inp` (the rest of each worker's
    arguments, the recipe's learning rate, seeds, ..., come from the recipe): see the
    module docstring."""
    reqs = {req.role: req for req in inp.roles}
    train = reqs["actor_train"]
    strategy = TrainStrategy(
        name=train.resolved_strategy,
        zero_stage=train.zero_stage,
        offload_optimizer=train.offload_optimizer,
        offload_params=train.offload_params,
        tp=train.tp,
        pp=train.pp,
    )
    reference, critic = reqs.get("reference"), reqs.get("critic")
    return PlannedArgs(
        strategy=strategy,
        precision=train.precision or FP32,  # the plan's training precision, by name
        infer=_infer_args(cfg, reqs["actor_infer"], plan) if ACTOR_INFER in reqs else None,
        reference_dtype=dtype_name(reference.param_bytes) if reference else None,
        # its own micro-batches (`critic.micro_batch_size`), as planned
        critic_micro_batch=critic.micro_batch if critic else None,
    )


def _infer_args(cfg: RecipeConfig, req: RoleRequest, plan: Plan) -> PlannedInfer:
    engine = req.resolved_strategy
    row = ENGINES[engine]
    dtype = dtype_name(req.param_bytes)
    sleeps = row.sleeps and infer_sleeps_while_training(plan.placements, req.offload_when_idle)
    options: EngineOptions | None = None
    if row.kv_pool == "gib":  # vllm: the plan's KV bytes
        options = VllmOptions(dtype=dtype, kv_cache_gib=rollout_of(cfg).vllm_kv_cache_gib)
        if plan.mode != "cpu":  # the reservation the plan judged, for the plan's sequences
            kv = plan.role_memory["actor_infer"].active.kv_cache
            options = VllmOptions(
                dtype=dtype,
                kv_cache_gib=round(kv / GiB, 3),
                tp=req.tp,  # one engine per tp GPUs (planning/ranks.py), its tensor_parallel_size
                max_num_seqs=req.max_num_seqs,
                max_model_len=req.seq_len,
                sleep_mode=sleeps,
            )
    elif row.kv_pool == "fraction":  # sglang: a share of the GPU
        options = SglangOptions(
            dtype=dtype,
            tp=req.tp,
            gpu_memory_utilization=req.gpu_memory_utilization,
            sleep_mode=sleeps,
        )
    return PlannedInfer(
        engine=engine,
        options=options,
        dtype=dtype,
        int8=bool(req.int8_copies),  # int8 on the CPU hf engine (planning refuses the rest)
        bf16_linears=bool(req.bf16_copies),  # bf16 copies over fp32 weights, CPU hf engine
        # the samples it holds at once, as planned
        decode_batch=req.max_num_seqs if row.decode_batch and plan.mode != "cpu" else None,
    )

"""The plan's decisions as the workers' arguments: one pure function, no Ray, no torch.

`roll plan` judges a run by modelling each role: its dtype (`param_bytes`: bf16 with fp32
master weights on GPUs, fp32 on the CPU), its strategy and ZeRO/offload layout, the
inference engine and its KV-cache reservation, and which idle roles leave their GPU.
`role_args` turns that same request (`recipe_plan_input`) and plan (the run's `RunPlan`,
planning/run_plan.py) into the keyword arguments of each role's workers, so what runs is
what the plan judged; the test in tests/planning/test_plan_reaches_workers.py checks every
decision against them.

What each decision becomes:
- training dtype: `precision="bf16-mixed"` (2 bytes/param in the plan) or `"fp32"` (4).
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

from typing import TYPE_CHECKING, Any

from rollcli.config.strategy_spec import ENGINES
from rollcli.planning.role_memory import infer_sleeps_while_training
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


def role_args(cfg: RecipeConfig, inp: PlanInput, plan: Plan) -> dict[str, dict[str, Any]]:
    """Per model role of the plan, the keyword arguments its workers get from the plan (on
    top of the recipe's learning rate, seeds, ...): see the module docstring."""
    reqs = {req.role: req for req in inp.roles}
    out: dict[str, dict[str, Any]] = {}
    train = reqs["actor_train"]
    strategy = TrainStrategy(
        name=train.resolved_strategy,
        zero_stage=train.zero_stage,
        offload_optimizer=train.offload_optimizer,
        offload_params=train.offload_params,
        tp=train.tp,
        pp=train.pp,
    )
    out["actor_train"] = {
        **strategy.worker_kwargs(),
        "precision": "bf16-mixed" if train.param_bytes == 2 else "fp32",
    }
    if "actor_infer" in reqs:
        out["actor_infer"] = _infer_args(cfg, reqs["actor_infer"], plan)
    if "reference" in reqs:
        out["reference"] = {"dtype": dtype_name(reqs["reference"].param_bytes)}
    if "critic" in reqs:  # its own micro-batches (`critic.micro_batch_size`), as planned
        out["critic"] = {"micro_batch_size": reqs["critic"].micro_batch}
    return out


def _infer_args(cfg: RecipeConfig, req: RoleRequest, plan: Plan) -> dict[str, Any]:
    engine = req.resolved_strategy
    row = ENGINES[engine]
    dtype = dtype_name(req.param_bytes)
    sleeps = row.sleeps and infer_sleeps_while_training(plan.placements, req.offload_when_idle)
    kwargs: dict[str, Any] | None = None
    if row.kv_pool == "gib":  # vllm: the plan's KV bytes
        kwargs = {"dtype": dtype, "kv_cache_gib": cfg.rollout.vllm_kv_cache_gib}
        if plan.mode != "cpu":  # the reservation the plan judged, for the plan's sequences
            kv = plan.role_memory["actor_infer"].active.kv_cache
            kwargs.update(
                tp=req.tp,  # one engine per tp GPUs (planning/ranks.py), its tensor_parallel_size
                kv_cache_gib=round(kv / GiB, 3),
                max_num_seqs=req.max_num_seqs,
                max_model_len=req.seq_len,
                sleep_mode=sleeps,
            )
    elif row.kv_pool == "fraction":  # sglang: a share of the GPU
        kwargs = {
            "dtype": dtype,
            "tp": req.tp,
            "gpu_memory_utilization": req.gpu_memory_utilization,
            "sleep_mode": sleeps,
        }
    out: dict[str, Any] = {"engine": engine, "engine_kwargs": kwargs, "dtype": dtype}
    if req.int8_copies:  # int8 on the CPU hf engine (planning refuses the rest)
        out["int8"] = True
    if req.bf16_copies:  # bf16 on the CPU hf engine: bf16 copies over fp32 weights
        out["bf16_linears"] = True
    if row.decode_batch and plan.mode != "cpu":  # the samples it holds at once, as planned
        out["decode_batch"] = req.max_num_seqs
    return out

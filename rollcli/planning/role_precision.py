"""The precision each planned role runs in: the bytes per weight the plan counts (and
runtime/role_args.py passes on as a dtype), whether the CPU hf engine holds bf16 copies of
its linears, and the `rollout.precision` values no engine of the run can honour. Read by
planning/from_recipe.py for every role's request. Imports neither torch nor Ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollcli.config.errors import ConfigError
from rollcli.config.precision_spec import BF16, BF16_MIXED, FP32, PRECISIONS
from rollcli.config.recipe import rollout_of
from rollcli.config.roles import ACTOR_INFER, ACTOR_TRAIN, CRITIC, REFERENCE
from rollcli.config.strategy_spec import AUTO, ENGINES

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.models.spec import ModelSpec


def bf16_copies(cfg: RecipeConfig, role: str, strategy: str | None, on_cpu: bool) -> bool:
    """A bf16 rollout on a CPU in the engine that holds copies of its linears (hf): fp32
    weights and a bf16 copy of each linear (strategies/bf16_linears.py), not a bf16 model."""
    return (
        role == ACTOR_INFER
        and on_cpu
        and rollout_of(cfg).precision == BF16
        and strategy is not None
        and ENGINES[strategy].int8
    )


def weight_precision(cfg: RecipeConfig, role: str, strategy: str | None, on_cpu: bool) -> str:
    """The precision each role's weights run in, a row of `PRECISIONS` (the plan counts its
    `weight_bytes`; runtime/role_args.py hands the name on): the engine's `rollout.precision`
    when set (int8, and bf16 in the CPU hf engine, keep the fp32 weights the sync writes,
    beside their int8 / bf16 copies), else fp32 on CPU and bf16 on GPUs; actor_train and
    the reference `train.precision` (bf16-mixed: bf16 compute, fp32 master weights; auto,
    before planning/auto_precision.py resolved it: bf16-mixed on GPUs, fp32 on a CPU); the
    critic fp32 (in this build)."""
    if role in (ACTOR_TRAIN, REFERENCE) and cfg.train.precision != AUTO:
        return cfg.train.precision
    precision = rollout_of(cfg).precision if role == ACTOR_INFER else AUTO
    if bf16_copies(cfg, role, strategy, on_cpu):
        return FP32  # the fp32 weights, beside the bf16 copies of the linears
    if precision != AUTO:
        return precision
    if on_cpu or role == CRITIC:
        return FP32
    return BF16_MIXED if role == ACTOR_TRAIN else BF16


def check_rollout_precision(
    cfg: RecipeConfig, engine: str, on_cpu: bool, model: ModelSpec | None = None
) -> None:
    """`rollout.precision` an engine of this run can honour, or one line saying why not
    (the row's `refusal`, int8 elsewhere than in an int8 engine on a CPU, or int8 on an MoE
    `model`: the int8 copies are of linears, and its experts' 3-D weights are none)."""
    row = PRECISIONS.get(rollout_of(cfg).precision)
    if row is not None and row.int8 and model is not None and model.num_experts:
        raise ConfigError(
            f"rollout.precision int8 on {model.name}, an MoE model ({model.num_experts} "
            "experts): the hf engine's int8 copies cover its linears only, and the experts "
            "would sample in fp32; set rollout.precision: bf16 (its copies cover the experts) "
            "or fp32"
        )
    if row is not None and row.int8 and (not ENGINES[engine].int8 or not on_cpu):
        where = "on GPUs" if not on_cpu else f"with rollout.engine {engine}"
        raise ConfigError(
            f"rollout.precision int8 {where}: int8 rollout is the hf engine's on the CPU "
            "(torch._int_mm); set rollout.engine: hf on a CPU run, or rollout.precision: bf16"
        )
    if row is not None and row.refusal:
        raise ConfigError(row.refusal)

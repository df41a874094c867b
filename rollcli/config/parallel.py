"""Which strategies split a model over GPUs (`devices.<role>.tp` / `pp`), and the refusal of
a split that a role's strategy would not run.

The planner divides a role's weights, KV cache and activations by tp · pp. A strategy that
ignores them holds the whole model on each GPU, so a plan that "fits" with `tp: 2` runs
out of memory. Hence one table, `PARALLEL_STRATEGIES`: a strategy runs the parallel keys it
lists and no others (a strategy that is not in it, such as hf, deepspeed or fsdp2, runs
neither). `parallel_error` refuses the rest when the recipe loads (a rule of
`capabilities.RULES`), and the planner's advice proposes tp only where it runs.

What that means per role:

| role | strategy | tp | pp |
| --- | --- | --- | --- |
| actor_train | megatron (refused in this build for want of a weight map) | yes | yes |
| actor_train | hf, deepspeed, any other | no | no |
| actor_infer | vllm, sglang, `auto` (vllm on GPUs) (GPU runs) | yes | no |
| actor_infer | hf (also `auto` on a CPU without vllm) | no | no |
| critic, reference, teacher | hf | no | no |
| reward, env | no model | no | no |

Inference pipeline stages are not wired (the placement gives an engine one rank per `tp`
GPUs), so `pp > 1` is refused for every engine with the equivalent `tp` as the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollcli.config.pipeline_spec import devices_key, roles_run
from rollcli.config.roles import ACTOR_INFER, ACTOR_TRAIN, CRITIC, FORWARD_ROLES
from rollcli.config.strategy_spec import (
    ENGINES,
    FALLBACK_ENGINE,
    STRATEGIES,
    EngineSpec,
    StrategySpec,
    strategy_spec,
)

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig

_ROWS: tuple[StrategySpec | EngineSpec, ...] = (*STRATEGIES.values(), *ENGINES.values())
# strategy or engine -> the parallel keys it runs (`devices.<role>.tp` / `pp` above 1): the
# rows' `parallel` (strategy_spec.py): megatron tp and pp, vllm and sglang tp
PARALLEL_STRATEGIES: dict[str, tuple[str, ...]] = {
    row.name: row.parallel for row in _ROWS if row.parallel
}
KINDS = {"tp": "tensor", "pp": "pipeline"}


def runs_parallel(strategy: str | None, key: str) -> bool:
    """Whether `strategy` runs `key` ("tp" or "pp") above 1.

    >>> runs_parallel("vllm", "tp"), runs_parallel("vllm", "pp"), runs_parallel("hf", "tp")
    (True, False, False)
    """
    return key in PARALLEL_STRATEGIES.get(strategy or "", ())


def parallel_error(cfg: RecipeConfig) -> str | None:
    """The first `devices.<role>.tp` / `pp` above 1 that the role's strategy does not run,
    as one line naming the key, its value and what to do instead; None when all run. Roles
    the recipe does not run are left to the planner (`from_recipe._check_devices`)."""
    for role, (strategy, named) in _strategies(cfg).items():
        place = getattr(cfg.devices, role)
        for key in ("tp", "pp"):
            value = getattr(place, key)
            if value == 1:
                continue
            at = f"devices.{role}.{key}={value}"
            if strategy is None:
                return f"{at}: {named} hold no model to split; remove devices.{role}.{key}"
            if not runs_parallel(strategy, key):
                why = (
                    "in this build it splits by tp only"
                    if runs_parallel(strategy, "tp")
                    else "each rank holds the whole model"
                )
                fix = _instead(cfg, role, key)
                return f"{at}: {named} runs no {KINDS[key]} parallelism ({why}); {fix}"
            if role == ACTOR_INFER and cfg.resources.gpus == 0:
                return (
                    f"{at}: tensor-parallel inference splits the engine over GPUs, and this "
                    f"is a CPU run (--gpus 0); set devices.{role}.{key}=1"
                )
    return None


def _strategies(cfg: RecipeConfig) -> dict[str, tuple[str | None, str]]:
    """`devices.<key>` of each role the recipe runs -> (its strategy, None for no model;
    how a refusal names it)."""
    out: dict[str, tuple[str | None, str]] = {}
    for name in roles_run(cfg):
        key = devices_key(name)
        if name == ACTOR_TRAIN:
            out[key] = (cfg.train.strategy, f"train.strategy {cfg.train.strategy}")
        elif name == ACTOR_INFER:
            out[key] = _engine(cfg)
        elif name == CRITIC:
            out[key] = ("hf", "the critic (trained with hf)")
        elif name in FORWARD_ROLES:
            out[key] = ("hf", f"the {name} (hf forwards)")
        else:
            out.setdefault(key, (None, f"the {key} workers"))
    return out


def _engine_key(cfg: RecipeConfig) -> str:
    """`rollout.engine` of a recipe that generates (rlvr, agentic); `auto` elsewhere."""
    rollout = getattr(cfg, "rollout", None)
    return rollout.engine if rollout is not None else "auto"


def _engine(cfg: RecipeConfig) -> tuple[str, str]:
    """`rollout.engine` as the run resolves it (`config.engines.resolve_engine`): `auto` is
    vllm on GPUs, and on a CPU vllm where it is installed, else hf."""
    engine = _engine_key(cfg)
    if engine != "auto":
        return engine, f"the {engine} inference engine"
    from rollcli.config.engines import resolve_engine

    resolved = resolve_engine("auto", on_gpu=cfg.resources.gpus > 0, check=False)
    if resolved != FALLBACK_ENGINE:
        return resolved, f"the {resolved} inference engine (rollout.engine auto)"
    return "hf", "rollout.engine auto (the hf engine here: vllm is not installed)"


def _instead(cfg: RecipeConfig, role: str, key: str) -> str:
    """What to do instead of an unrunnable `devices.<role>.<key>`."""
    place = getattr(cfg.devices, role)
    reset = f"set devices.{role}.{key}=1"
    if role == ACTOR_INFER:
        engine, _ = _engine(cfg)
        if key == "pp":
            if runs_parallel(engine, "tp"):
                return f"use devices.actor_infer.tp={place.tp * place.pp} with pp=1 instead"
            return reset
        if _engine_key(cfg) == "auto":
            return (
                f"install vllm (pip install vllm), or set rollout.engine=vllm or sglang, or {reset}"
            )
        return f"use rollout.engine=vllm or sglang (they split the engine over tp GPUs), or {reset}"
    if role == ACTOR_TRAIN and cfg.train.lora is None:  # LoRA trains with hf only
        shard = "to spread the model's states over the GPUs use"
        row = strategy_spec(cfg.train.strategy)
        if not row.shards_states:  # hf (auto too)
            return f"{reset}, and {shard} train.strategy=deepspeed with devices.actor_train.zero_stage=3"
        if row.zero:
            return f"{reset}, and {shard} devices.actor_train.zero_stage=3"
    return reset

"""`train.strategy: auto`: the plain `hf` strategy where it fits, else the smallest change
from the planner's advice that fits, applied to the recipe and said why.

On a CPU auto is always `hf` (CPU runs and their numbers do not depend on it). On GPUs
the recipe is planned with `hf`; a plan that fits keeps it. One that does not climbs the
advice ladder (`advice.climb`) with only the steps a run can take by itself: a sharded
strategy and its stage, optimizer/parameter offload, activation recomputation, a smaller
micro-batch, idle offload of colocated roles, the engine's memory share and concurrent
sequences. Never LoRA (it changes what trains), more GPUs or tensor parallelism (they
change the machine), and never a key the recipe or the command line set: what a user set
is kept. Where no such change fits, auto stays `hf` and the plan refuses with the whole
advice, as for any plan that does not fit.

`roll plan`, `roll train --dry-run` and `roll train` all resolve through `resolve_auto`,
so the three show and run the same choice; the run's recipe.yaml records the result.
Imports neither torch nor Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from rollcli.config.errors import ConfigError
from rollcli.config.strategy_spec import AUTO_STRATEGY
from rollcli.planning.advice import changed_keys, climb
from rollcli.planning.advice_steps import AUTO_LADDER
from rollcli.planning.devices import PlanError

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.planner import Plan
    from rollcli.planning.request import PlanInput

# RoleRequest fields auto may change (advice_steps.RECIPE_KEYS names their recipe keys)
AUTO_FIELDS = frozenset(
    {
        "strategy",
        "zero_stage",
        "offload_optimizer",
        "offload_params",
        "grad_checkpointing",
        "micro_batch",
        "offload_when_idle",
        "gpu_memory_utilization",
        "max_num_seqs",
    }
)


@dataclass(frozen=True)
class AutoChoice:
    """The recipe with `train.strategy` resolved, and what auto did, one line each."""

    cfg: RecipeConfig
    lines: list[str]


def resolve_auto(
    cfg: RecipeConfig, *, gpu_kind: str | None = None, gpu_mem_gib: float | None = None
) -> AutoChoice:
    """`cfg` with `train.precision: auto` (planning/auto_precision.py), then
    `train.strategy: auto` resolved (a value the recipe set: unchanged, no line).
    `gpu_kind`, `gpu_mem_gib`: `roll plan`'s flags of the same names."""
    from rollcli.planning.auto_precision import resolve_precision

    cfg, lines = resolve_precision(cfg)
    choice = _resolve_strategy(cfg, gpu_kind=gpu_kind, gpu_mem_gib=gpu_mem_gib)
    return AutoChoice(choice.cfg, lines + choice.lines)


def _resolve_strategy(
    cfg: RecipeConfig, *, gpu_kind: str | None, gpu_mem_gib: float | None
) -> AutoChoice:
    if cfg.train.strategy != "auto":
        return AutoChoice(cfg, [])
    plain = with_keys(cfg, {"train.strategy": AUTO_STRATEGY})
    if cfg.resources.gpus == 0:
        return AutoChoice(plain, ["train.strategy auto → hf (a CPU run trains with plain torch)"])
    from rollcli.planning.from_recipe import recipe_plan_input
    from rollcli.planning.planner import assess

    flags: dict[str, Any] = {"gpu_kind": gpu_kind, "gpu_mem_gib": gpu_mem_gib}
    inp = recipe_plan_input(plain, **flags)
    try:
        plan = assess(inp)
    except PlanError:  # a request that cannot work at any size: the plan's own error says so
        return AutoChoice(plain, [])
    if plan.fits:
        return AutoChoice(plain, [f"train.strategy auto → hf: it fits ({_peak(plan)})"])
    explicit = explicit_keys(cfg)

    def permit(current: PlanInput, candidate: PlanInput) -> bool:
        keys = _auto_keys(inp, candidate)
        if keys is None or any(k in explicit and _value(cfg, k) != v for k, v in keys.items()):
            return False
        try:
            with_keys(plain, keys)
        except ConfigError:  # a key this recipe does not have (or a value it refuses)
            return False
        return True

    steps, final = climb(inp, plan, assess, AUTO_LADDER, permit)
    keys = _auto_keys(inp, steps[-1][1]) if steps else None
    if not final.fits or not keys:
        return AutoChoice(
            plain,
            [
                f"train.strategy auto → hf: it needs {_peak(plan)}, and nothing auto may "
                "change fits (the advice below says what would)"
            ],
        )
    chosen = with_keys(plain, keys)
    lines = [f"train.strategy auto: hf needs {_peak(plan)}, so auto chose:"]
    lines += [f"  - {text}" for text, _, _ in steps]
    lines.append(f"  → it fits ({_peak(final)})")
    return AutoChoice(chosen, lines)


def _auto_keys(start: PlanInput, candidate: PlanInput) -> dict[str, object] | None:
    """The recipe keys from `start` to `candidate`, None where one is not auto's to set."""
    for before, after in zip(start.roles, candidate.roles, strict=False):
        for name in before.__dataclass_fields__:
            if name not in AUTO_FIELDS and getattr(before, name) != getattr(after, name):
                return None
    return changed_keys(start, candidate)


def _peak(plan: Plan) -> str:
    worst = plan.peak_device
    if worst is None or not worst.capacity_bytes:
        return "no GPU memory judged"
    used, cap = worst.memory_bytes["total"] / 2**30, worst.capacity_bytes / 2**30
    return f"{used:.1f} of {cap:.1f} GiB per GPU at the peak"


def with_keys(cfg: RecipeConfig, keys: dict[str, object]) -> RecipeConfig:
    """`cfg` with dotted `keys` set, validated as a recipe is."""
    from rollcli.config.loader import apply_overrides, validate_recipe

    raw = apply_overrides(cfg.model_dump(mode="json"), dict(keys))
    return validate_recipe(raw, "train.strategy auto")


def explicit_keys(model: BaseModel, prefix: str = "") -> set[str]:
    """The dotted keys a recipe (its file or the command line) set, its defaults left out.

    >>> from rollcli.config.loader import validate_recipe
    >>> sorted(explicit_keys(validate_recipe({"pipeline": "sft", "train": {"lr": 1e-5}})))
    ['pipeline', 'train.lr']
    """
    keys: set[str] = set()
    for name in model.model_fields_set:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            keys |= explicit_keys(value, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def _value(cfg: RecipeConfig, key: str) -> object:
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part)
    return node

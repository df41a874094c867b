"""`train.precision: auto`: bf16-mixed where the device computes bf16 faster, else fp32,
applied to the recipe and said why.

`bf16-mixed` is bf16 compute with fp32 master weights and Adam states, and fp32 log-prob,
entropy and loss reductions (strategies/precision.py); the reference then holds bf16
weights. On GPUs auto is bf16-mixed, as it always was. On a CPU it is bf16-mixed where the
CPU's bf16 matmul beats fp32's by `BF16_MIN_SPEEDUP` at the model's own shapes (the probe
of planning/cpu_bf16.py, measured once per machine and cached), for the `hf` strategy (the
one a CPU run trains with); fp32 elsewhere. A value the recipe or the command line set is
kept. `roll plan`, `roll train --dry-run` and `roll train` resolve it alike (through
`planning.auto_strategy.resolve_auto`), and the run's recipe.yaml records the result, so
a resumed run keeps its precision on any machine. Imports no torch until it probes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rollcli.config.pipeline_spec import spec_of
from rollcli.config.precision_spec import BF16, BF16_MIXED, FP32
from rollcli.config.recipe import rollout_of
from rollcli.config.strategy_spec import strategy_spec

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig


# Whether auto picks bf16-mixed on a CPU that computes bf16 faster: on since the learning
# regression suite held under it (`bench/learning.py rlvr-math --seeds 9 --set
# train.precision=bf16-mixed`: 9 of 9 seeds met their targets, mean 0.319 against fp32's
# 0.302, paired p = 0.26; issue #69, docs/performance.md). False keeps fp32 on every CPU.
CPU_AUTO_BF16 = True


def auto_precision(cfg: RecipeConfig) -> tuple[str, str]:
    """The precision `train.precision: auto` resolves to for `cfg`, and why (one line)."""
    if cfg.resources.gpus > 0:
        return BF16_MIXED, "GPUs compute in bf16"
    if strategy_spec(cfg.train.strategy).owns_bf16:  # its own bf16 mode: GPUs only here
        return FP32, f"bf16 on a CPU is the hf strategy's, not {cfg.train.strategy}'s"
    from rollcli.planning.cpu_bf16 import BF16_MIN_SPEEDUP, bf16_flags, bf16_probe
    from rollcli.planning.model_spec import model_spec

    model = model_spec(cfg.model)
    probe = bf16_probe(model.hidden_size, model.intermediate_size, model.vocab_size)
    ratio = probe["speedup"]
    flags = "/".join(bf16_flags()) or "no bf16 flag"
    measured = f"bf16 matmuls run {ratio:.1f}x fp32's on this CPU ({flags})"
    if ratio < BF16_MIN_SPEEDUP:
        return FP32, f"{measured}, under the {BF16_MIN_SPEEDUP}x that pays for bf16"
    if not CPU_AUTO_BF16:
        return FP32, (
            f"{measured}, but bf16-mixed awaits its learning check on the CPU "
            "(docs/performance.md); train.precision: bf16-mixed uses it"
        )
    return BF16_MIXED, measured


# The recipes whose learning check held with a bf16 rollout on a CPU (the hf engine's bf16
# linears over fp32 weights, bf16-mixed training, `tis`), each with the lr warm-up (optimizer
# steps) it held with: `rollout.precision: auto` gives them bf16 where auto trains in
# bf16-mixed, and the warm-up where the recipe sets none. rlvr-math: with a 3-step warm-up its
# 9 seeds met the learning bar's floor and its test over seeds, and against the fp32 engine
# the paired mean was -0.011 (95% interval -0.047 to +0.025: non-inferior at -0.05); without
# the warm-up Adam's first update collapsed seed 2 to bare numbers (0.121). The warm-up comes
# with the bf16 rollout only: under the fp32 trainer of a CPU without native bf16 it
# collapsed seed 2 instead (0.008). docs/evaluation.md has the verdicts. Every other recipe
# has had no check (bench/learning.py for an rlvr recipe, a paired held-out evaluation for
# an agentic one).
ROLLOUT_BF16_RECIPES: dict[str, int] = {"rlvr-math": 3}


def auto_rollout_precision(cfg: RecipeConfig) -> tuple[str, str]:
    """What `rollout.precision: auto` gives a CPU run's engine, and why (one line): bf16
    for a recipe of `ROLLOUT_BF16_RECIPES` in the hf engine where training is bf16-mixed
    (the CPU computes bf16 natively), else fp32."""
    from rollcli.config.engines import resolve_engine
    from rollcli.config.strategy_spec import FALLBACK_ENGINE

    if resolve_engine(rollout_of(cfg).engine, check=False) != FALLBACK_ENGINE:
        return FP32, "bf16 copies of the linears are the hf engine's"
    if cfg.train.precision != BF16_MIXED:
        return FP32, "training is fp32 here"
    if cfg.name not in ROLLOUT_BF16_RECIPES:
        return FP32, (
            f"a bf16 rollout has not held {cfg.name}'s learning check, docs/evaluation.md; "
            "rollout.precision: bf16 uses it"
        )
    return BF16, (
        f"the hf engine's bf16 linears over fp32 weights; {cfg.name}'s learning suite held "
        "with it, docs/evaluation.md"
    )


def resolve_precision(cfg: RecipeConfig) -> tuple[RecipeConfig, list[str]]:
    """`cfg` with `train.precision: auto` resolved, then on a CPU `rollout.precision: auto`
    (GPUs keep auto: bf16 engines) with the lr warm-up a bf16 rollout comes with, and the
    lines saying so (none for what the recipe set)."""
    lines = []
    if cfg.train.precision == "auto":
        chosen, why = auto_precision(cfg)
        train = cfg.train.model_copy(update={"precision": chosen})
        cfg = cfg.model_copy(update={"train": train})
        lines.append(f"train.precision auto → {chosen} ({why})")
    if spec_of(cfg).engine and rollout_of(cfg).precision == "auto" and not cfg.resources.gpus:
        chosen, why = auto_rollout_precision(cfg)
        rollout = rollout_of(cfg).model_copy(update={"precision": chosen})
        cfg = cfg.model_copy(update={"rollout": rollout})
        lines.append(f"rollout.precision auto → {chosen} ({why})")
        warmup = ROLLOUT_BF16_RECIPES.get(cfg.name, 0) if chosen == BF16 else 0
        if warmup and "warmup_steps" not in cfg.train.model_fields_set:
            train = cfg.train.model_copy(update={"warmup_steps": warmup})
            cfg = cfg.model_copy(update={"train": train})
            lines.append(
                f"train.warmup_steps → {warmup} (the lr warm-up {cfg.name}'s learning check "
                "held with under the bf16 rollout)"
            )
    return cfg, lines

"""The line `roll plan` and `roll train --dry-run` print about rollouts and the long tail of
reply lengths (rlvr): what `rollout.partial` will do, or where it would pay off; and the
engine check partial rollouts need (`check_partial`).

Measured (bench/long_tail.py, docs/performance.md): on 2 CPU cores, colocated, partial
rollouts trained 1.57x the samples per second of sync rollouts at 256 new tokens; async
rollouts alone 0.84x (the roles share the cores). On separate GPUs the rollout also overlaps
training; not measured here.
"""

from __future__ import annotations

from rollcli.config.errors import ConfigError
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import RecipeConfig, rollout_of
from rollcli.config.strategy_spec import ENGINES

MEASURED = "1.57x sync's samples/s on 2 CPU cores at 256 tokens, bench/long_tail.py"
LONG_REPLIES = 128  # max_new_tokens from which the hint is printed


def partial_line(cfg: RecipeConfig) -> str | None:
    """None for a pipeline without prompt rollouts, or short replies without partial."""
    spec = spec_of(cfg)
    if not spec.engine or spec.plays_episodes or not spec.async_rollout:
        return None
    rollout = rollout_of(cfg)
    if rollout.partial:
        ahead = "one step ahead" if rollout.max_staleness >= 2 else "after each step"
        return (
            "rollout.partial: twice the step's groups in flight, the next rollout starts "
            f"{ahead}; a paused sample continues while its oldest token is at most "
            f"{rollout.max_staleness} updates old ({MEASURED})"
        )
    if rollout.max_new_tokens >= LONG_REPLIES:
        return (
            f"replies up to {rollout.max_new_tokens} tokens: rollout.partial=true "
            f"rollout.max_staleness=2 trains while the long ones finish ({MEASURED})"
        )
    return None


def check_partial(cfg: RecipeConfig, engine: str | None) -> None:
    """Partial rollouts continue paused samples in the hf engine only (`engine: auto` that
    resolves to vllm included)."""
    rollout = getattr(cfg, "rollout", None)
    if rollout is not None and rollout.partial and engine and not ENGINES[engine].partial:
        raise ConfigError(
            f"rollout.partial: the {engine} engine cannot continue paused samples here; "
            "set rollout.engine=hf, or rollout.partial=false"
        )

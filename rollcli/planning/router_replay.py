"""`algorithm.router_replay` checked against the run's model and engine before anything
starts, and the line `roll plan` / `roll train --dry-run` print about it for MoE models.

R3 replays the experts the rollout engine picked, so the engine must return them: roll's
hf engine records them (`strategies/hf_infer.py`); the vllm and sglang versions roll drives
return none, so R3 is refused there and R2 (the trainer's own record of the old policy,
any engine) named instead. R2 and R3 need a model with MoE layers.
"""

from __future__ import annotations

from typing import Any

from rollcli.config.errors import ConfigError
from rollcli.models.spec import ModelSpec

RECORDING_ENGINES = ("hf",)  # engines that return the experts they picked


def check_router_replay(cfg: Any, model: ModelSpec, engine: str | None) -> None:
    """One line for a `router_replay` the run cannot honour (`off` always can)."""
    algorithm = getattr(cfg, "algorithm", None)
    mode = "off" if algorithm is None else algorithm.router_replay
    if mode == "off":
        return
    if not model.num_experts:
        raise ConfigError(
            f"algorithm.router_replay={mode}: {model.name} has no MoE layers (replay applies "
            "to MoE models only); set algorithm.router_replay=off"
        )
    if mode == "R3" and engine is not None and engine not in RECORDING_ENGINES:
        raise ConfigError(
            f"algorithm.router_replay=R3: the {engine} engine does not return the experts it "
            "picked; use rollout.engine=hf, or algorithm.router_replay=R2 (the old policy's "
            "routing, any engine)"
        )
    if mode == "R2" and cfg.train.shared_prefix:
        raise ConfigError(
            "algorithm.router_replay=R2 records the old policy's routing on plain rows: set "
            "train.shared_prefix=false, or use algorithm.router_replay=R3"
        )


def router_replay_line(cfg: Any, model: ModelSpec, engine: str | None) -> str | None:
    """What an MoE run replays and why (None for a dense model or a run without a policy
    update)."""
    algorithm = getattr(cfg, "algorithm", None)
    if algorithm is None or not model.num_experts:
        return None
    mode = algorithm.router_replay
    active = f"{model.num_experts_per_token} of {model.num_experts} experts per token"
    if mode == "R3":
        return f"MoE ({active}): router_replay R3, the {engine} engine's experts replayed"
    if mode == "R2":
        return f"MoE ({active}): router_replay R2, the old policy's experts replayed"
    hint = (
        "R3 replays the hf engine's"
        if engine in RECORDING_ENGINES
        else f"R3 needs rollout.engine=hf ({engine} returns no experts); R2 replays the old policy's"
    )
    return f"MoE ({active}): router_replay off; {hint} (algorithm.router_replay)"

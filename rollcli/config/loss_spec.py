"""One row per policy loss (`algorithm.policy_loss`): what the code asks of each.

Config (`algorithm.py`'s refusals, `READ_WHEN` and the `auto` correction), the planner
(`planning/from_recipe.py`'s check of the engine's log-probs), the CLI's summary and the RL
objective (`algorithms/policy_loss.py`, `algorithms/objective.py`) read a loss's traits
from its row (`LOSSES[name].clipped`) instead of comparing its name; the losses themselves
are `objective`, the functions of `algorithms/policy_loss.POLICY_LOSSES` (a test,
tests/config/test_loss_spec.py, ties the rows to `PolicyLossName` and to those functions).

Imports nothing from roll, as `strategy_spec.py` (config is the lowest layer the algorithms
import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

PolicyLossName = Literal["ppo", "gspo", "topr", "pg", "raftpp"]


@dataclass(frozen=True)
class LossSpec:
    """A policy loss. `objective`: its function in `algorithms/policy_loss.py`.
    `clipped`: clips its ratio to `[1 - clip_low, 1 + clip_high]` (topr truncates its own at
    1, pg has none), so it reads `clip_low` / `clip_high`. `dual_clip`: takes
    `algorithm.dual_clip` (refused for the others). `sampler_ratio`: its importance ratio is
    to the sampler `mu` (the engine's log-probs), not to `pi_old`: the off-policy correction
    weighs `pi_theta / mu` for it, and `auto` picks none (`resolved_correction`): pg
    (off-policy REINFORCE) and topr. `tapers`: it weighs its tokens by `pi_theta / mu`
    itself (topr), so it takes only which tokens the correction drops, and needs `mu`
    under the trainer's distribution whatever the correction. `positive_only`: it
    aggregates over the tokens with a positive advantage only (raftpp's mask,
    `policy_loss.aggregation_mask`). `refused`: the `algorithm.off_policy.correction`
    values it refuses, each with why."""

    name: str
    objective: str
    clipped: bool = False
    dual_clip: bool = False
    sampler_ratio: bool = False
    tapers: bool = False
    positive_only: bool = False
    refused: dict[str, str] = field(default_factory=dict)


LOSSES: dict[str, LossSpec] = {
    s.name: s
    for s in (
        LossSpec("ppo", objective="ppo_clip_loss", clipped=True, dual_clip=True),
        LossSpec("gspo", objective="gspo_loss", clipped=True),
        LossSpec(
            "topr",
            objective="topr_loss",
            sampler_ratio=True,
            tapers=True,
            refused={
                "tis": (
                    "off_policy.correction tis cannot apply to policy_loss topr: TOPR "
                    "truncates its own ratio to the sampler (negatives at 1, positives by "
                    "design not); use mis or icepop to drop outlier tokens, or none"
                )
            },
        ),
        LossSpec("pg", objective="pg_loss", sampler_ratio=True),
        LossSpec(
            "raftpp", objective="raftpp_loss", clipped=True, dual_clip=True, positive_only=True
        ),
    )
}
LOSS_NAMES = tuple(LOSSES)  # ppo, gspo, topr, pg, raftpp


def losses_where(**wanted: object) -> tuple[str, ...]:
    """The losses whose fields equal `wanted`.

    >>> losses_where(dual_clip=True), losses_where(sampler_ratio=True)
    (('ppo', 'raftpp'), ('topr', 'pg'))
    """
    return tuple(n for n, s in LOSSES.items() if all(getattr(s, k) == v for k, v in wanted.items()))

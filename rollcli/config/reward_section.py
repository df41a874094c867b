"""The `reward` section of a recipe: the reward function and its arguments."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rollcli.config.sections import PositiveFloat, PositiveInt, Section


class RewardConfig(Section):
    """Reward function by name (`math`, `code`, `ifeval`, `judge`, `judge_local`, `mix`) or
    as `package.module:function`.

    `options` are keyword arguments for the function (e.g. the judge's `base_url`). With
    `fn: mix`, `routes` maps each sample tag (domain) to a reward and `route_options` gives
    one domain's reward extra options; see docs/rewards.md.

    `convention` is how user code is called: `auto` recognises it from the function's
    parameters (roll's own, verl's `compute_score`, TRL's batched functions, OpenRLHF's
    `reward_func`: rollcli/rewards/conventions.py); with `mix`, each route's is recognised.
    """

    fn: str = "math"
    convention: Literal["auto", "roll", "verl", "trl", "openrlhf"] = "auto"
    format_weight: Annotated[float, Field(ge=0, le=1)] = 0.1
    # the math reward's format credit also for a reply cut at the token limit (it reaches a
    # reward that names it, like format_weight; off: only finished replies earn it)
    format_when_cut: bool = False
    num_workers: PositiveInt = 1
    timeout_s: PositiveFloat = 10.0
    options: dict[str, Any] = Field(default_factory=dict)
    routes: dict[str, str] = Field(default_factory=dict)
    route_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _routes_for_mix(self) -> RewardConfig:
        """The shape of `routes` (the reward names and options themselves are the reward
        registry's to check, before anything starts: rollcli/launch/plugin_check.py)."""
        if self.fn == "mix" and not self.routes:
            raise ValueError(
                "reward.fn is 'mix' but reward.routes is empty; map each tag to a reward, "
                "e.g. reward.routes = {math: math, code: code}"
            )
        if self.fn != "mix" and (self.routes or self.route_options):
            raise ValueError("reward.routes and reward.route_options apply to reward.fn = mix")
        if self.fn == "mix" and self.convention != "auto":
            raise ValueError(
                "reward.convention applies to one function; with reward.fn = mix each route's "
                "convention is recognised from its parameters"
            )
        unknown = sorted(set(self.route_options) - set(self.routes))
        if unknown:
            raise ValueError(f"reward.route_options.{unknown[0]} has no route in reward.routes")
        return self

    @property
    def worker_options(self) -> dict[str, Any]:
        """The keyword options the reward workers pass to the function (each reaches a
        function that names it: rollcli/rewards/conventions.py)."""
        out: dict[str, Any] = {
            "format_weight": self.format_weight,
            "format_when_cut": self.format_when_cut,
            **self.options,
        }
        if self.routes:
            out.update(routes=dict(self.routes), route_options=dict(self.route_options))
        return out

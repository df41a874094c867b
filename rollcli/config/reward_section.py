"""The `reward` section of a recipe: the reward function and its arguments."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from rollcli.config.sections import PositiveFloat, PositiveInt, Section


class RewardConfig(Section):
    """Reward function by name (`math`, `code`, `ifeval`, `judge`, `judge_local`, `mix`) or
    as `package.module:function`.

    `options` are keyword arguments for the function (e.g. the judge's `base_url`). With
    `fn: mix`, `routes` maps each sample tag (domain) to a reward and `route_options` gives
    one domain's reward extra options; see docs/rewards.md.
    """

    fn: str = "math"
    format_weight: Annotated[float, Field(ge=0, le=1)] = 0.1
    num_workers: PositiveInt = 1
    timeout_s: PositiveFloat = 10.0
    options: dict[str, Any] = Field(default_factory=dict)
    routes: dict[str, str] = Field(default_factory=dict)
    route_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _routes_for_mix(self) -> RewardConfig:
        from rollcli.rewards.registry import BUILTIN_REWARDS

        if self.fn == "mix" and not self.routes:
            raise ValueError(
                "reward.fn is 'mix' but reward.routes is empty; map each tag to a reward, "
                "e.g. reward.routes = {math: math, code: code}"
            )
        if self.fn != "mix" and (self.routes or self.route_options):
            raise ValueError("reward.routes and reward.route_options apply to reward.fn = mix")
        for tag, ref in self.routes.items():
            if ref == "mix" or (ref not in BUILTIN_REWARDS and ":" not in ref):
                import difflib

                close = difflib.get_close_matches(ref, list(BUILTIN_REWARDS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"reward.routes.{tag} = {ref!r} is not a built-in reward{hint} nor "
                    "'package.module:function'"
                )
        unknown = sorted(set(self.route_options) - set(self.routes))
        if unknown:
            raise ValueError(f"reward.route_options.{unknown[0]} has no route in reward.routes")
        self._check_options()
        return self

    def _check_options(self) -> None:
        """Each built-in reward declares its options: an unknown `reward.options` key (or
        `reward.route_options.<tag>` key) is an error with the closest declared one."""
        from rollcli.rewards.registry import check_options, declared_options

        if self.fn != "mix":
            types = declared_options(self.fn)
            if types is not None:
                check_options(types, self.options, "reward.options", f"the {self.fn} reward's")
            return
        union: dict[str, Any] | None = {}
        for tag, ref in sorted(self.routes.items()):
            types = declared_options(ref)
            if types is None:  # user code takes what it takes
                union = None
                continue
            where = f"reward.route_options.{tag}"
            check_options(types, self.route_options.get(tag, {}), where, f"the {ref} reward's")
            if union is not None:
                union.update(types)
        if union is not None:  # the other options go to every route; one must declare each
            owner = f"the routed rewards' ({', '.join(sorted(set(self.routes.values())))})"
            check_options(union, self.options, "reward.options", owner)

    @property
    def worker_options(self) -> dict[str, Any]:
        """The keyword options the reward workers pass to the function."""
        out: dict[str, Any] = {"format_weight": self.format_weight, **self.options}
        if self.routes:
            out.update(routes=dict(self.routes), route_options=dict(self.route_options))
        return out

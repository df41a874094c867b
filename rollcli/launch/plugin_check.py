"""The plugins a recipe names, checked before anything starts: its rewards, its environments
and its agent program.

Config checks a recipe's shape and never imports a plugin: `rollcli.envs` and
`rollcli.rewards` sit above `rollcli.config` in the layers (pyproject.toml), so the checks
that read their registries live here, one layer up. `check_recipe` (prelaunch.py) runs
`check_plugins` first, so `roll plan`, `roll train`, `--dry-run` and `roll doctor` refuse a
misspelled reward, reward option or environment with the same one line, before Ray starts
and before the run folder exists; `roll eval`, `roll reward` and `roll data` call it too.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from rollcli.config.errors import ConfigError

if TYPE_CHECKING:
    from rollcli.config.agentic_section import AgenticConfig
    from rollcli.config.recipe import RecipeConfig
    from rollcli.config.reward_section import RewardConfig


def check_plugins(cfg: RecipeConfig) -> None:
    """Raise what `roll train` would for a reward, environment or agent program of `cfg`
    that does not resolve or does not take the recipe's options, one line each."""
    reward = getattr(cfg, "reward", None)
    if reward is not None:
        check_reward(reward)
    agentic = getattr(cfg, "agentic", None)
    if agentic is not None:
        check_envs(agentic)


def check_reward(reward: RewardConfig) -> None:
    """Each route of `reward.fn: mix` names a built-in or user code; each built-in takes the
    options given to it (`reward.options`, `reward.route_options.<tag>`); reward.fn and each
    route resolve to a function (user code imports here as the reward workers import it)."""
    from rollcli.rewards.registry import BUILTIN_REWARDS, load_reward_fn

    for tag, ref in reward.routes.items():
        if ref == "mix" or (ref not in BUILTIN_REWARDS and ":" not in ref):
            others = [name for name in BUILTIN_REWARDS if name != "mix"]  # mix routes to others
            close = difflib.get_close_matches(ref, others, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"reward.routes.{tag} = {ref!r} is not a built-in reward{hint} nor "
                "'package.module:function'"
            )
    try:
        _check_reward_options(reward)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for ref in (reward.fn, *reward.routes.values()):
        load_reward_fn(ref)


def _check_reward_options(reward: RewardConfig) -> None:
    """Each reward takes the options it declares (a built-in) or names as parameters (user
    code, `rollcli.rewards.conventions.option_names`): an unknown `reward.options` key (or
    `reward.route_options.<tag>` key) is an error with the closest one it takes, since an
    option reaches only a reward that takes it."""
    from rollcli.rewards.registry import check_options

    if reward.fn != "mix":
        types = _option_types(reward.fn, reward.convention)
        check_options(types, reward.options, "reward.options", f"the {reward.fn} reward's")
        return
    union: dict[str, Any] = {}
    for tag, ref in sorted(reward.routes.items()):
        types = _option_types(ref)
        where = f"reward.route_options.{tag}"
        check_options(types, reward.route_options.get(tag, {}), where, f"the {ref} reward's")
        union.update(types)
    # the other options go to every route; one must take each
    owner = f"the routed rewards' ({', '.join(sorted(set(reward.routes.values())))})"
    check_options(union, reward.options, "reward.options", owner)


def _option_types(ref: str, convention: str = "auto") -> dict[str, Any]:
    from rollcli.rewards.conventions import option_types_of
    from rollcli.rewards.registry import declared_options, load_reward_fn

    types = declared_options(ref)
    return option_types_of(load_reward_fn(ref), convention) if types is None else types


def check_envs(agentic: AgenticConfig) -> None:
    """agentic.env is a registered environment or a factory that imports, agentic.val_env's
    env is a registered one, agentic.agent is a function that imports, and each env takes the
    recipe's env_kwargs (for training and validation)."""
    from rollcli.envs.registry import env_factory, env_names

    names = env_names()
    if ":" in agentic.env:  # a user factory, "package.module:factory"
        try:
            factory = env_factory(agentic.env)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not callable(factory):
            raise ConfigError(f"agentic.env = {agentic.env!r} is not a class or function")
    elif agentic.env not in names:
        raise ConfigError(f"agentic.env = {agentic.env!r} {_not_registered(agentic.env, names)}")
    if agentic.val_env is not None and agentic.val_env.env not in names:
        env = agentic.val_env.env
        raise ConfigError(f"agentic.val_env.env = {env!r} {_not_registered(env, names)}")
    if agentic.agent is not None:
        from rollcli.envs.tools.catalog import load_function

        try:
            load_function(agentic.agent, "agentic.agent")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    _check_env_kwargs(agentic)


def _not_registered(env: str, names: list[str]) -> str:
    close = difflib.get_close_matches(env, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"is not a registered environment{hint}; choose one of {', '.join(names)}"


def _check_env_kwargs(agentic: AgenticConfig) -> None:
    """The environment takes the recipe's teaching options and env_kwargs, for training and
    validation."""
    from rollcli.rollout.agentic_setup import env_kwargs, env_parameters

    takes, open_kwargs = env_parameters(agentic.env)
    for where, validation in (("agentic.env_kwargs", False), ("agentic.val_env_kwargs", True)):
        unknown = sorted(set(env_kwargs(agentic, validation)) - takes)
        if unknown and not open_kwargs:
            raise ConfigError(
                f"{where}.{unknown[0]}: environment {agentic.env!r} takes no {unknown[0]!r}; "
                f"it takes {', '.join(sorted(takes)) or 'no options'}"
            )

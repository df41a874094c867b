"""Reward functions by name, or user code as `package.module:function`.

A reward function is a plain function `fn(response: str, answer: str, **fields) -> float |
dict` where a dict holds at least `score` (other numeric keys become metrics). `fields` are
the sample's other fields (`tag`, `prompt`, ...) and the recipe's reward options.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from rollcli.config.errors import did_you_mean

RewardFn = Callable[..., float | dict[str, Any]]

# name -> "module:function", imported lazily so listing rewards stays cheap.
BUILTIN_REWARDS: dict[str, str] = {
    "math": "rollcli.rewards.math_rule:math_reward",
}


class RewardNotFoundError(ValueError):
    pass


def load_reward_fn(ref: str) -> RewardFn:
    """Resolve `math` or `my_pkg.rewards:score` to a callable."""
    target = BUILTIN_REWARDS.get(ref, ref)
    module_name, sep, attr = target.partition(":")
    if not sep:
        raise RewardNotFoundError(
            f"reward.fn = {ref!r} is neither a built-in reward{did_you_mean(ref, list(BUILTIN_REWARDS))} "
            f"(built-ins: {', '.join(BUILTIN_REWARDS)}) nor of the form 'package.module:function'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise RewardNotFoundError(
            f"reward.fn = {ref!r}: cannot import {module_name!r} ({exc})"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise RewardNotFoundError(f"reward.fn = {ref!r}: {module_name!r} has no function {attr!r}")
    return fn

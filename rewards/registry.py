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
    "code": "rollcli.rewards.code:code_reward",
    "ifeval": "rollcli.rewards.ifeval.reward:ifeval_reward",
    "judge": "rollcli.rewards.judge.http:judge_reward",
    "judge_local": "rollcli.rewards.judge.local:local_judge_reward",
    "mix": "rollcli.rewards.mix:mix_reward",
}

# The sample fields each built-in reward reads besides `response`; "a|b" means either.
BUILTIN_FIELDS: dict[str, tuple[str, ...]] = {
    "math": ("answer",),
    "code": ("tests|answer",),
    "ifeval": ("constraints|answer",),
    "judge": (),
    "judge_local": (),
    "mix": ("tag",),
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


def required_fields(ref: str, fn: RewardFn) -> tuple[str, ...]:
    """Fields a sample needs for reward `ref` ("a|b": either), besides `response`.

    Built-ins list theirs; for user code they are the keyword-only parameters without a
    default (`def score(response, answer, *, tests): ...` needs `tests`).
    """
    if ref in BUILTIN_FIELDS:
        return BUILTIN_FIELDS[ref]
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(
        p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    )

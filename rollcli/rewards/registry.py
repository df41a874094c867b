"""Reward functions by name, or user code as `package.module:function` or
`path/to/file.py:function`.

A reward function is a plain function `fn(response: str, answer: str, **fields) -> float |
dict` where a dict holds at least `score` (other numeric keys become metrics), or one in
verl's, TRL's or OpenRLHF's convention (`rollcli.rewards.conventions` says how each is
called). `fields` are the sample's other fields (`tag`, `prompt`, `finished`, ...).
"""

from __future__ import annotations

import difflib
import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from rollcli.config.errors import did_you_mean

RewardFn = Callable[..., float | dict[str, Any]]
_Fn = TypeVar("_Fn", bound=Callable[..., Any])  # a reward (or batch reward) a decorator keeps

# name -> "module:function", imported lazily so listing rewards stays cheap.
BUILTIN_REWARDS: dict[str, str] = {
    "math": "rollcli.rewards.math_rule:math_reward",
    "code": "rollcli.rewards.code:code_reward",
    "ifeval": "rollcli.rewards.ifeval.reward:ifeval_reward",
    "judge": "rollcli.rewards.judge.http:judge_reward",
    "judge_local": "rollcli.rewards.judge.local:local_judge_reward",
    "general": "rollcli.rewards.general:general_reward",
    "mix": "rollcli.rewards.mix:mix_reward",
}

# The sample fields each built-in reward reads besides `response`; "a|b" means either.
BUILTIN_FIELDS: dict[str, tuple[str, ...]] = {
    "math": ("answer",),
    "code": ("tests|answer",),
    "ifeval": ("constraints|answer",),
    "judge": (),
    "judge_local": (),
    "general": ("answer",),
    "mix": ("tag",),
}


class RewardNotFoundError(ValueError):
    pass


def reward_options(*names: str) -> Callable[[_Fn], _Fn]:
    """Declare which keyword parameters of a reward a recipe may set in `reward.options`;
    their types and defaults are the signature's. Any other option key is a config error.

    >>> @reward_options("scale")
    ... def scaled(response: str, answer: str, *, scale: float = 1.0, **fields) -> float:
    ...     return scale * len(response)
    >>> option_types(scaled)
    {'scale': <class 'float'>}
    """

    def declare(fn: _Fn) -> _Fn:
        params = inspect.signature(fn).parameters
        missing = [n for n in names if n not in params]
        if missing:
            raise TypeError(
                f"{fn.__name__} declares option {missing[0]!r} but has no such parameter"
            )
        fn.reward_options = names  # type: ignore[attr-defined]
        return fn

    return declare


def option_types(fn: RewardFn) -> dict[str, Any] | None:
    """Option name -> type for a reward that declares its options, else `None`."""
    names = getattr(fn, "reward_options", None)
    if names is None:
        return None
    hints = typing.get_type_hints(fn)
    return {name: hints.get(name, Any) for name in names}


def declared_options(ref: str) -> dict[str, Any] | None:
    """The options built-in reward `ref` declares; `None` for user code (`module:function`),
    whose options are the parameters it names (`rollcli.rewards.conventions.option_names`)."""
    if ref not in BUILTIN_REWARDS:
        return None
    return option_types(load_reward_fn(ref)) or {}


def check_options(types: dict[str, Any], options: dict[str, Any], where: str, owner: str) -> None:
    """`ValueError` (one line, with did-you-mean) for a key of `options` not in `types`, or
    a value of the wrong type; `where` is the key path, `owner` says whose options these are."""
    from pydantic import TypeAdapter, ValidationError

    for key, value in options.items():
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1, cutoff=0.5)
            hint = f" (did you mean '{where}.{close[0]}'?)" if close else ""
            takes = ", ".join(types) or "none"
            raise ValueError(f"unknown key '{where}.{key}'{hint}; {owner} options: {takes}")
        try:
            TypeAdapter(types[key]).validate_python(value)
        except ValidationError as exc:
            raise ValueError(f"{where}.{key} = {value!r}: {exc.errors()[0]['msg']}") from None


def load_reward_fn(ref: str) -> RewardFn:
    """Resolve `math`, `my_pkg.rewards:score` or `path/to/file.py:score` to a callable
    (user code loads through `rollcli.config.user_code`, as every plugin does)."""
    from rollcli.config.user_code import load_object

    if ref not in BUILTIN_REWARDS and ":" not in ref:
        raise RewardNotFoundError(
            f"reward.fn = {ref!r} is neither a built-in reward{did_you_mean(ref, list(BUILTIN_REWARDS))} "
            f"(built-ins: {', '.join(BUILTIN_REWARDS)}) nor user code "
            "('package.module:function' or 'path/to/file.py:function')"
        )
    try:
        fn = load_object(BUILTIN_REWARDS.get(ref, ref), "reward.fn")
    except ValueError as exc:
        raise RewardNotFoundError(str(exc)) from None
    if not callable(fn):
        raise RewardNotFoundError(f"reward.fn = {ref!r} is not a function")
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

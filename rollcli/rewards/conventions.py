"""The ways a reward function can be called: roll's own, verl's, TRL's and OpenRLHF's.

A reward file written for verl, TRL or OpenRLHF works unchanged: its convention is
recognised from the function's signature (or named by `reward.convention`), and roll makes
the call that project makes.

| convention | recognised by a parameter | roll calls | a call scores | returns |
| --- | --- | --- | --- | --- |
| `roll` | (any other) | `fn(response, answer, **fields)` | one sample | a number, or a dict with `score` |
| `verl` | `solution_str`, `ground_truth` | `fn(data_source=, solution_str=, ground_truth=, extra_info=)` | one sample | a number, or a dict with `score` |
| `trl` | `completions` | `fn(prompts=[..], completions=[..], completion_ids=[..], **columns)` | a batch | a list of numbers (`None`: not scored) |
| `openrlhf` | `queries`, `labels` | `fn(queries=[..], prompts=[..], labels=[..])` | a batch | a list or tensor, or a dict with `rewards` |

A function receives only the parameters it names, unless it takes `**kwargs`: then it gets
every field of the sample too (`tag`, `prompt`, `finished`, the dataset columns it reads).
The recipe's options (`reward.options`, `reward.format_weight`) reach only a function that
names them (or declares them with `reward_options`). A batched convention gets each field
as a list, one entry per sample, as TRL passes dataset columns.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rollcli.rewards.registry import BUILTIN_REWARDS, RewardFn, load_reward_fn
from rollcli.rewards.reward_returns import (
    RewardReturnError,
    as_list,
    one_result,
    openrlhf_results,
    short,
)

if TYPE_CHECKING:
    from rollcli.config.reward_section import RewardConfig

Make = Callable[[dict[str, Any]], Any]  # one sample -> one argument's value


def _response(s: dict[str, Any]) -> Any:
    return s["response"]


def _answer(s: dict[str, Any]) -> Any:
    return s.get("answer", "")


def _prompt(s: dict[str, Any]) -> Any:
    return s.get("prompt", "")


def _trl_prompt(s: dict[str, Any]) -> Any:
    """TRL's prompt: the chat messages for conversational data, else the text."""
    return s["messages"] if "messages" in s else _prompt(s)


def _trl_completion(s: dict[str, Any]) -> Any:
    """TRL's completion: an assistant message list for conversational data, else the text."""
    return [{"role": "assistant", "content": s["response"]}] if "messages" in s else s["response"]


@dataclass(frozen=True)
class Convention:
    name: str
    marks: tuple[str, ...]  # a parameter of these names recognises the convention
    batched: bool  # one call scores every sample given (else one call a sample)
    args: dict[str, Make]  # the arguments it gives, each made from one sample
    returns: str  # what it returns, for messages
    columns: tuple[str, ...] = ()  # its arguments a dataset column of that name gives


CONVENTIONS: dict[str, Convention] = {
    c.name: c
    for c in (
        Convention(
            "verl",
            ("solution_str", "ground_truth"),
            False,
            {
                "data_source": lambda s: s.get("data_source", s.get("tag", "")),
                "solution_str": _response,
                "ground_truth": _answer,
                "extra_info": lambda s: s.get("extra_info") or {},
            },
            "a number or a dict with 'score'",
            ("data_source", "extra_info"),
        ),
        Convention(
            "trl",
            ("completions",),
            True,
            {
                "prompts": _trl_prompt,
                "completions": _trl_completion,
                "completion_ids": lambda s: list(s.get("response_ids") or []),
            },
            "a list of numbers (None: not scored), one per completion",
        ),
        Convention(
            "openrlhf",
            ("queries", "labels"),
            True,
            {
                "queries": lambda s: _prompt(s) + s["response"],
                "prompts": _prompt,
                "labels": _answer,
            },
            "a list or tensor of numbers, one per query, or a dict with 'rewards'",
        ),
        Convention(
            "roll",
            (),
            False,
            {"response": _response, "answer": _answer},
            "a number or a dict with 'score'",
        ),
    )
}
CONVENTION_NAMES = ("auto", *CONVENTIONS)
# fields every sample may carry, never read from a dataset column of that name
SAMPLE_FIELDS = ("response", "answer", "tag", "prompt", "finished", "messages", "response_ids")


@dataclass(frozen=True)
class Signature:
    positional: tuple[str, ...]  # the leading parameters that take positional arguments
    star_args: bool  # takes *args
    named: frozenset[str]  # parameters that take keyword arguments
    open_kwargs: bool  # takes **kwargs


def read_signature(fn: Callable[..., Any]) -> Signature:
    """What `fn` takes; a callable whose signature cannot be read takes anything.

    >>> read_signature(lambda response, answer, *, tag=None: 0.0)  # doctest: +ELLIPSIS
    Signature(positional=('response', 'answer'), star_args=False, named=frozenset({...}), open_kwargs=False)
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return Signature((), True, frozenset(), True)
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return Signature(
        tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)),
        any(p.kind is p.VAR_POSITIONAL for p in params),
        frozenset(p.name for p in params if p.kind in keyword),
        any(p.kind is p.VAR_KEYWORD for p in params),
    )


def recognise(fn: Callable[..., Any]) -> Convention:
    """The convention `fn`'s parameter names say it has (roll's when none does).

    >>> def compute_score(data_source, solution_str, ground_truth, extra_info=None): ...
    >>> def accuracy_reward(completions, solution, **kwargs): ...
    >>> def reward_func(queries, prompts, labels): ...
    >>> [recognise(f).name for f in (compute_score, accuracy_reward, reward_func)]
    ['verl', 'trl', 'openrlhf']
    >>> recognise(lambda response, answer: 1.0).name
    'roll'
    """
    named = read_signature(fn).named
    for convention in CONVENTIONS.values():
        if any(mark in named for mark in convention.marks):
            return convention
    return CONVENTIONS["roll"]


@dataclass(frozen=True)
class BoundReward:
    """A reward function with its convention: the call roll makes for some samples, and
    what the call returned as one result per sample."""

    fn: RewardFn
    convention: Convention
    sig: Signature
    declared: frozenset[str]  # the options it declares with `reward_options`

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", type(self.fn).__name__)

    def arguments(
        self, samples: list[dict[str, Any]], options: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(args, kwargs) of the call that scores `samples` (one sample, unless batched).

        >>> r = bind(lambda response, answer, *, tag: 0.0)
        >>> r.arguments([{"response": "4", "answer": "4", "tag": "m", "prompt": "2+2"}], {"k": 1})
        (('4', '4'), {'tag': 'm'})
        """
        conv, sig = self.convention, self.sig
        assert conv.batched or len(samples) == 1, "one sample a call"

        def value(make: Make) -> Any:
            return [make(s) for s in samples] if conv.batched else make(samples[0])

        own = {name: value(make) for name, make in conv.args.items()}
        args: tuple[Any, ...] = ()
        takes = sig.named
        if conv.name == "roll":  # response and answer positionally, as far as it takes them
            taken = len(own) if sig.star_args else min(len(sig.positional), len(own))
            args = tuple(own.values())[:taken]
            own = dict(list(own.items())[taken:])
            takes = sig.named - set(sig.positional[:taken])
        keys = {k for s in samples for k in s} - {"response", "answer"} - set(conv.args)
        fields = {k: value(_key_getter(k)) for k in sorted(keys) if sig.open_kwargs or k in takes}
        own = {k: v for k, v in own.items() if sig.open_kwargs or k in takes}
        opts = {k: v for k, v in options.items() if k in takes or k in self.declared}
        return args, {**fields, **own, **opts}

    def results(self, out: Any, n: int) -> list[dict[str, Any]]:
        """One result per sample (`{"score", <metrics>..., "error"}`) from what a call for
        `n` samples returned; `RewardReturnError` saying what came back when a value is not
        one the convention returns (the caller fails the call's samples with it).

        >>> bind(lambda completions, **kw: [1, None]).results([1, None], 2)
        [{'score': 1.0, 'error': None}, {'score': 0.0, 'error': None, 'skipped': 'returned None'}]
        """
        if not self.convention.batched:
            return [one_result(out, self.convention.name, self.convention.returns)]
        if self.convention.name == "openrlhf" and isinstance(out, dict):
            return openrlhf_results(out, n, self.convention.returns)
        values = as_list(out)
        if values is None or len(values) != n:
            got = f"{len(values)} values" if values is not None else short(out)
            raise RewardReturnError(
                f"returned {got} for {n} samples; a {self.convention.name} reward returns "
                f"{self.convention.returns}"
            )
        skip = self.convention.name == "trl"  # TRL's None: this function does not apply
        return [
            {"score": 0.0, "error": None, "skipped": "returned None"}
            if v is None and skip
            else one_result(v, self.convention.name, self.convention.returns)
            for v in values
        ]

    def describe(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """The call, its values shortened.

        >>> bind(lambda response, answer: 0).describe(("x" * 50, "4"), {})
        "<lambda>('xxxxxxxxxxxx...xxxxxxxxxxxxx', '4')"
        """
        parts = [short(a) for a in args] + [f"{k}={short(v)}" for k, v in kwargs.items()]
        return f"{self.name}({', '.join(parts)})"


def bind(fn: RewardFn, convention: str = "auto") -> BoundReward:
    """`fn` with the convention named (`auto`: recognised from its signature)."""
    if convention != "auto" and convention not in CONVENTIONS:
        raise ValueError(
            f"reward.convention = {convention!r}: one of {', '.join(CONVENTION_NAMES)}"
        )
    conv = recognise(fn) if convention == "auto" else CONVENTIONS[convention]
    declared = frozenset(getattr(fn, "reward_options", ()) or ())
    return BoundReward(fn, conv, read_signature(fn), declared)


def option_names(fn: RewardFn, convention: str = "auto") -> frozenset[str]:
    """The recipe options `fn` takes: the parameters it names beyond its convention's own
    (and the sample's fields), and those it declares.

    >>> sorted(option_names(lambda response, answer, *, scale=1.0, **kw: 0.0))
    ['scale']
    """
    reward = bind(fn, convention)
    own = set(reward.convention.args) | set(SAMPLE_FIELDS)
    return frozenset(reward.sig.named - own) | reward.declared


def option_types_of(fn: RewardFn, convention: str = "auto") -> dict[str, Any]:
    """`option_names` with each one's type where it is annotated as a plain `bool`, `int`,
    `float` or `str` (else `Any`), for checking `reward.options` before a run.

    >>> option_types_of(lambda response, answer, *, scale=1.0: 0.0)
    {'scale': typing.Any}
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: no types
        hints = {}
    plain = (bool, int, float, str)
    return {
        n: hints[n] if hints.get(n) in plain else Any for n in sorted(option_names(fn, convention))
    }


ALL_COLUMNS = "*"  # every column of the dataset


def columns_asked(fn: RewardFn, convention: str = "auto") -> set[str]:
    """The dataset columns a reward reads: the parameters it names that are not its
    convention's own nor the sample's fields (`def score(response, answer, *, level)` reads
    `level`), verl's `data_source` and `extra_info`, and for a TRL function with `**kwargs`
    every column (TRL passes them all).

    >>> sorted(columns_asked(lambda response, answer, *, level, **fields: 0.0))
    ['level']
    >>> columns_asked(lambda completions, **kwargs: [0.0])
    {'*'}
    """
    reward = bind(fn, convention)
    conv, sig = reward.convention, reward.sig
    if conv.name == "trl" and sig.open_kwargs:
        return {ALL_COLUMNS}
    own = set(conv.args) - set(conv.columns)
    if conv.name == "roll":
        own = set(sig.positional[:2])
    asked = set(sig.named) - own - set(SAMPLE_FIELDS) - reward.declared
    return asked | (set(conv.columns) if sig.open_kwargs else set())


def reward_columns(reward: RewardConfig) -> set[str]:
    """The dataset columns the recipe's reward reads (`columns_asked`), over every route
    of `mix`; built-in rewards read only the prompt's fields. They reach the reward as
    keywords, as TRL passes them."""
    names: set[str] = set()
    for ref, convention in user_rewards(reward):
        names |= columns_asked(load_reward_fn(ref), convention)
    return names


def user_rewards(reward: RewardConfig) -> list[tuple[str, str]]:
    """(reference, convention) of each user function the `reward` section names:
    `reward.fn`, or each route of `mix` (recognised from its signature)."""
    if reward.fn != "mix":
        return [] if reward.fn in BUILTIN_REWARDS else [(reward.fn, reward.convention)]
    refs = dict.fromkeys(r for r in reward.routes.values() if r not in BUILTIN_REWARDS)
    return [(ref, "auto") for ref in refs]


def _key_getter(key: str) -> Callable[[Mapping[str, Any]], Any]:
    """A sample's `key` (None where it has none)."""
    return lambda sample: sample.get(key)

"""What a reward call returned, read as one result per sample: a number, a dict with a
`score`, a list or tensor of them for a batched convention, OpenRLHF's dict of `rewards`;
anything else is a `RewardReturnError` saying what came back (rewards/conventions.py says
which convention returns what)."""

from __future__ import annotations

import math
import numbers
import reprlib
from typing import Any


class RewardReturnError(ValueError):
    """A reward returned something its convention does not (the message says what)."""


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 30, 30, 2, 2, 3


def short(value: Any) -> str:
    return _REPR.repr(value)


def as_list(out: Any) -> list[Any] | None:
    """A list, tuple, numpy array or tensor as a list; anything else None."""
    if hasattr(out, "tolist") and not isinstance(out, numbers.Number):
        out = out.tolist()
    return list(out) if isinstance(out, (list, tuple)) else None


def number(value: Any) -> float | None:
    """A finite float from a number (bool, numpy and 0-d tensor included), else None."""
    if hasattr(value, "item") and not isinstance(value, numbers.Number):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return None
    if not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def one_result(out: Any, convention: str, returns: str) -> dict[str, Any]:
    """One sample's value as a result: a number, or a dict with a numeric `score` (its
    other numbers metrics, text kept); an `error` key in a dict fails the sample.
    `convention` and `returns` name the convention and what it returns, for the message.

    >>> one_result({"score": 1, "len": 3}, "roll", "a number")
    {'score': 1.0, 'len': 3, 'error': None}
    """
    result = dict(out) if isinstance(out, dict) else {"score": out}
    score = number(result.get("score"))
    if score is None and isinstance(result.get("score"), numbers.Real):
        raise RewardReturnError(f"returned a non-finite score {short(out)}")
    if score is None:
        raise RewardReturnError(f"returned {short(out)}; a {convention} reward returns {returns}")
    error = result.get("error")
    return {**result, "score": score, "error": str(error) if error else None}


def openrlhf_results(out: dict[str, Any], n: int, returns: str) -> list[dict[str, Any]]:
    """OpenRLHF's `{"rewards", "scores", "extra_logs"}`: `rewards` train; `scores` and each
    `extra_logs` entry (a value a sample, or one for all) become metrics."""
    if "rewards" not in out:
        raise RewardReturnError(
            f"returned a dict with keys {sorted(out)}; an openrlhf reward's dict has 'rewards'"
        )
    rewards = as_list(out["rewards"])
    if rewards is None or len(rewards) != n:
        raise RewardReturnError(f"returned 'rewards' {short(out['rewards'])} for {n} samples")
    metrics: dict[str, Any] = {}
    if "scores" in out:
        metrics["scores"] = out["scores"]
    metrics.update(out.get("extra_logs") or {})
    results = []
    for i, r in enumerate(rewards):
        one = {"score": r}
        for key, value in metrics.items():
            values = as_list(value)
            picked = values[i] if values is not None and len(values) == n else value
            if number(picked) is not None:
                one[key] = number(picked)
        results.append(one_result(one, "openrlhf", returns))
    return results

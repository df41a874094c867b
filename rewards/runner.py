"""Run a reward function over samples so that one bad sample never stops a run.

Each sample gets a wall-clock timeout (a `SIGALRM` timer, so it interrupts pure-Python
loops and sleeps; reward workers call this from their process's main thread). A reward that
raises or times out scores 0 and its error is returned with the sample.

A *batch* reward (marked with `@batch_reward`) takes the whole list of samples at once,
`fn(samples, timeout_s=..., **options) -> list[score | dict]`, so it can score them in
parallel (the code sandbox runs many programs at once, each in its own isolated and
time-limited process, so no `SIGALRM` is needed there). A batch reward that raises fails
every sample of the batch with its error; one that sets `error` on a result fails only
that sample.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rollcli.rewards.registry import RewardFn

logging.getLogger("math_verify").setLevel(logging.ERROR)


class RewardTimeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield  # timers only work in the main thread; run without one
        return

    def _raise(signum: int, frame: Any) -> None:
        raise RewardTimeout(f"reward took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def batch_reward(fn: RewardFn) -> RewardFn:
    """Mark `fn(samples: list[dict], *, timeout_s, **options) -> list` as a batch reward."""
    fn.batched = True  # type: ignore[attr-defined]
    return fn


def is_batched(fn: RewardFn) -> bool:
    return bool(getattr(fn, "batched", False))


def _error_text(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _normalise(out: Any) -> dict[str, Any]:
    """A reward's return value as `{"score": finite float, ..., "error": str | None}`."""
    result = dict(out) if isinstance(out, dict) else {"score": out}
    error = result.get("error")
    score = float(result["score"])
    if not math.isfinite(score):
        raise ValueError(f"reward returned a non-finite score {score!r}")
    result["score"] = score
    result["error"] = str(error) if error else None
    return result


def score_one(
    fn: RewardFn, sample: dict[str, Any], options: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    """`{"score": float, <metrics>..., "error": str | None}` for one sample."""
    fields = {k: v for k, v in sample.items() if k not in ("response", "answer")}
    try:
        with _deadline(timeout_s):
            out = fn(sample["response"], sample.get("answer", ""), **fields, **options)
        result = _normalise(out)
    except RewardTimeout as exc:
        result = {"score": 0.0, "error": f"timeout: {exc}"}
    except Exception as exc:  # a broken reward must not kill the run
        result = {"score": 0.0, "error": _error_text(exc)}
    return result


def score_batch(
    fn: RewardFn, samples: list[dict[str, Any]], options: dict[str, Any], timeout_s: float
) -> list[dict[str, Any]]:
    """Score `samples` with one call of a batch reward; errors stay with their samples."""
    if not samples:
        return []
    try:
        outs = list(fn(samples, **{"timeout_s": timeout_s, **options}))
        if len(outs) != len(samples):
            raise ValueError(
                f"batch reward returned {len(outs)} results for {len(samples)} samples"
            )
    except Exception as exc:  # a broken reward must not kill the run
        error = _error_text(exc)
        return [{"score": 0.0, "error": error} for _ in samples]
    results = []
    for out in outs:
        try:
            results.append(_normalise(out))
        except Exception as exc:
            results.append({"score": 0.0, "error": _error_text(exc)})
    return results


def score_samples(
    fn: RewardFn, samples: list[dict[str, Any]], options: dict[str, Any], timeout_s: float
) -> list[dict[str, Any]]:
    """One result per sample, in order: the path training and `roll reward` both take."""
    if is_batched(fn):
        return score_batch(fn, samples, options, timeout_s)
    return [score_one(fn, s, options, timeout_s) for s in samples]

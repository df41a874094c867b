"""Run a reward function over samples so that one bad sample never stops a run.

Each sample gets a wall-clock timeout (a `SIGALRM` timer, so it interrupts pure-Python
loops and sleeps; reward workers call this from their process's main thread). A reward that
raises or times out scores 0 and its error is returned with the sample.
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


def score_one(
    fn: RewardFn, sample: dict[str, Any], options: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    """`{"score": float, <metrics>..., "error": str | None}` for one sample."""
    fields = {k: v for k, v in sample.items() if k not in ("response", "answer")}
    try:
        with _deadline(timeout_s):
            out = fn(sample["response"], sample.get("answer", ""), **fields, **options)
        result = dict(out) if isinstance(out, dict) else {"score": out}
        score = float(result["score"])
        if not math.isfinite(score):
            raise ValueError(f"reward returned a non-finite score {score!r}")
        result["score"] = score
        result["error"] = None
    except RewardTimeout as exc:
        result = {"score": 0.0, "error": f"timeout: {exc}"}
    except Exception as exc:  # a broken reward must not kill the run
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        result = {"score": 0.0, "error": last}
    return result


def score_samples(
    fn: RewardFn, samples: list[dict[str, Any]], options: dict[str, Any], timeout_s: float
) -> list[dict[str, Any]]:
    return [score_one(fn, s, options, timeout_s) for s in samples]

"""Run a reward function over samples so that one bad sample never stops a run.

Every call has a wall-clock deadline (`call_with_deadline`: a `SIGALRM` timer on the main
thread, so it interrupts pure-Python loops and sleeps; off the main thread the call runs in
a daemon thread that is abandoned at the deadline). A sample gets `timeout_s`; a batch gets
`timeout_s` per sample plus `BATCH_GRACE_S`. A reward that raises or misses its deadline
scores 0 and its error (`timeout: ...`) is returned with the sample, or with every sample of
the batch.

A reward is called in its convention (roll's, verl's, TRL's or OpenRLHF's:
`rollcli.rewards.conventions`); an error names the call roll made. A roll *batch* reward
(marked with `@batch_reward`, as `code`, `judge` and `mix` are) takes the whole list of samples at once,
`fn(samples, timeout_s=..., **options) -> list[score | dict]`, so it can score them in
parallel (the code sandbox runs many programs at once, each in its own isolated and
time-limited process). A batch reward that raises or hangs fails
every sample of the batch with its error; one that sets `error` on a result fails only
that sample.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from rollcli.rewards.conventions import BoundReward, bind
from rollcli.rewards.registry import RewardFn
from rollcli.rewards.reward_returns import RewardReturnError

logging.getLogger("math_verify").setLevel(logging.ERROR)


BATCH_GRACE_S = 5.0
"""Added to a batch's deadline, so that a batch reward's own per-sample limits (the code
sandbox's) fire first and say why."""


class RewardTimeout(Exception):
    pass


@contextmanager
def _alarm(seconds: float, what: str) -> Iterator[None]:
    """Raise `RewardTimeout` in this (main) thread after `seconds`; nests, and an outer
    deadline still fires on time."""

    def _raise(signum: int, frame: Any) -> None:
        raise RewardTimeout(f"{what} took longer than {seconds:g} s")

    start = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _raise)
    outer = signal.setitimer(signal.ITIMER_REAL, seconds)[0]
    if 0 < outer < seconds:
        signal.setitimer(signal.ITIMER_REAL, outer)  # the outer deadline comes first
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:  # re-arm the outer deadline with what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


def call_with_deadline(seconds: float, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)`, or `RewardTimeout` once `seconds` pass.

    On the main thread (reward workers, `roll reward`) a `SIGALRM` timer interrupts `fn`
    (pure-Python loops, sleeps, socket waits). Elsewhere no timer can: `fn` runs in a daemon
    thread that is abandoned at the deadline, so the caller still goes on.
    """
    if threading.current_thread() is threading.main_thread():
        with _alarm(seconds, what):
            return fn(*args)
    return in_thread_with_deadline(
        seconds,
        f"reward {what}",
        RewardTimeout(f"{what} took longer than {seconds:g} s"),
        fn,
        *args,
    )


def in_thread_with_deadline(
    seconds: float, name: str, late: BaseException, fn: Callable[..., Any], *args: Any
) -> Any:
    """`fn(*args)` in a daemon thread named `name`: its value, or what it raised, or `late`
    raised once `seconds` pass (the thread is abandoned: nothing can stop it, and the caller
    goes on). The reward runner's deadline off the main thread, and a tool's
    (`rollcli.envs.tools.tool`)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["out"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["exc"] = exc

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise late
    if "exc" in box:
        raise box["exc"]
    return box["out"]


_Fn = TypeVar("_Fn", bound=Callable[..., Any])


def batch_reward(fn: _Fn) -> _Fn:
    """Mark `fn(samples: list[dict], *, timeout_s, **options) -> list` as a batch reward."""
    fn.batched = True  # type: ignore[attr-defined]
    return fn


def is_batched(fn: RewardFn) -> bool:
    return bool(getattr(fn, "batched", False))


def _error_text(exc: BaseException) -> str:
    return traceback.format_exception_only(type(exc), exc)[-1].strip()


def _normalise(out: Any) -> dict[str, Any]:
    """A batch reward's value for one sample as `{"score": finite float, ..., "error"}`."""
    result = dict(out) if isinstance(out, dict) else {"score": out}
    error = result.get("error")
    score = float(result["score"])
    if not math.isfinite(score):
        raise ValueError(f"reward returned a non-finite score {score!r}")
    result["score"] = score
    result["error"] = str(error) if error else None
    return result


def score_call(
    reward: BoundReward, samples: list[dict[str, Any]], options: dict[str, Any], timeout_s: float
) -> list[dict[str, Any]]:
    """One call of `reward` in its convention for `samples` (one, unless it is batched):
    a result per sample. A raise, a timeout or a return the convention does not allow
    fails each sample with an error naming the call roll made (`accuracy_reward(prompts=...,
    completions=[...]) raised KeyError: 'solution'`)."""
    args, kwargs = reward.arguments(samples, options)
    deadline = timeout_s * len(samples) + (BATCH_GRACE_S if len(samples) > 1 else 0.0)
    try:
        out = call_with_deadline(deadline, "reward", lambda: reward.fn(*args, **kwargs))
        return reward.results(out, len(samples))
    except RewardTimeout as exc:
        error = f"timeout: {exc}"
    except RewardReturnError as exc:
        error = f"{reward.describe(args, kwargs)} {exc}"
    except Exception as exc:  # a broken reward must not kill the run
        error = f"{reward.describe(args, kwargs)} raised {_error_text(exc)}"
    return [{"score": 0.0, "error": error} for _ in samples]


def score_one(
    fn: RewardFn,
    sample: dict[str, Any],
    options: dict[str, Any],
    timeout_s: float,
    convention: str = "auto",
) -> dict[str, Any]:
    """`{"score": float, <metrics>..., "error": str | None}` for one sample."""
    return score_samples(fn, [sample], options, timeout_s, convention)[0]


def score_batch(
    fn: Callable[..., Any],  # a batch reward (`batch_reward`): one result per sample
    samples: list[dict[str, Any]],
    options: dict[str, Any],
    timeout_s: float,
) -> list[dict[str, Any]]:
    """Score `samples` with one call of a batch reward; errors stay with their samples."""
    if not samples:
        return []
    deadline = timeout_s * len(samples) + BATCH_GRACE_S

    def call() -> list[Any]:
        return list(fn(samples, **{"timeout_s": timeout_s, **options}))

    try:
        outs = call_with_deadline(deadline, "batch reward", call)
        if len(outs) != len(samples):
            raise ValueError(
                f"batch reward returned {len(outs)} results for {len(samples)} samples"
            )
    except RewardTimeout as exc:
        return [{"score": 0.0, "error": f"timeout: {exc}"} for _ in samples]
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
    fn: RewardFn,
    samples: list[dict[str, Any]],
    options: dict[str, Any],
    timeout_s: float,
    convention: str = "auto",
) -> list[dict[str, Any]]:
    """One result per sample, in order: the path training and `roll reward` both take. A
    roll batch reward (`@batch_reward`) gets the samples and every option; any other reward
    is called in its convention (`rollcli.rewards.conventions`): a batched one once for
    all the samples, the others once a sample."""
    if not samples:
        return []
    if is_batched(fn):
        return score_batch(fn, samples, options, timeout_s)
    reward = bind(fn, convention)
    if reward.convention.batched:
        return score_call(reward, samples, options, timeout_s)
    return [r for s in samples for r in score_call(reward, [s], options, timeout_s)]

"""Collapse signals: the patterns a policy shows when RL is damaging it rather than teaching it.

The demo's collapse of 2026-11-25 (held-out accuracy 0.137 at step 5, 0.031 at step 10) showed
all of them: replies shrank to 2-4 tokens, KL to the reference reached 2.2, the format part of
the reward kept rising while the correct part fell, and validation ended below step 0. Each
signal is judged on the step lines of `metrics.jsonl` against the run's own first steps:

| signal | trips when |
| --- | --- |
| `length` | mean response length (`response_length/mean`, last 2 steps) < `LENGTH_FRACTION` of the first 2 steps' |
| `entropy` | `actor/entropy` (last 2 steps) < `ENTROPY_FRACTION` of the first 2 steps' |
| `kl` | `actor/kl` (last 2 steps) > `KL_LIMIT` nats per token |
| `format_not_correct` | `reward/format` rose by >= `FORMAT_RISE` while `reward/correct` fell (first 2 vs last 2 steps) |
| `validation` | a validation score below the step-0 one after one above it |

A signal is reported once, when it first trips (`CollapseWatch.update`), as a warning in
`events.log`; with `run.stop_on_collapse` the run stops there with a checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

WINDOW = 2  # steps averaged at each end: one step's batch is small and noisy
LENGTH_FRACTION = 0.5
ENTROPY_FRACTION = 0.3
KL_LIMIT = 1.0
FORMAT_RISE = 0.2


def _ends(rows: Sequence[dict[str, Any]], key: str) -> tuple[float, float] | None:
    """(mean of the first `WINDOW` values of `key`, mean of the last `WINDOW`), once there are
    `2 * WINDOW` values; None before."""
    values = [float(r[key]) for r in rows if key in r]
    if len(values) < 2 * WINDOW:
        return None
    return sum(values[:WINDOW]) / WINDOW, sum(values[-WINDOW:]) / WINDOW


def validation_score(metrics: dict[str, Any]) -> tuple[str, float] | None:
    """The metric a validation is judged by, as (name, higher-is-better value): `val/accuracy`
    where the pipeline reports one, else minus `val/loss`; None for a line without either.

    >>> validation_score({"val/accuracy": 0.25, "val/loss": 1.0})
    ('val/accuracy', 0.25)
    >>> validation_score({"val/loss": 1.5})
    ('val/loss', -1.5)
    """
    if "val/accuracy" in metrics:
        return "val/accuracy", float(metrics["val/accuracy"])
    if "val/loss" in metrics:
        return "val/loss", -float(metrics["val/loss"])
    return None


def collapse_signals(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every signal of the module table that `rows` (metrics lines in step order) shows now,
    with a sentence of the numbers behind it.

    >>> rows = [{"step": s, "response_length/mean": n} for s, n in enumerate([24, 26, 9, 3], 1)]
    >>> collapse_signals(rows)
    {'length': 'mean response length fell to 6.0 tokens (25.0 over the first 2 steps)'}
    """
    found: dict[str, str] = {}
    length = _ends(rows, "response_length/mean")
    if length and length[1] < LENGTH_FRACTION * length[0]:
        found["length"] = (
            f"mean response length fell to {length[1]:.1f} tokens "
            f"({length[0]:.1f} over the first {WINDOW} steps)"
        )
    entropy = _ends(rows, "actor/entropy")
    if entropy and entropy[1] < ENTROPY_FRACTION * entropy[0]:
        found["entropy"] = f"policy entropy fell to {entropy[1]:.3f} (from {entropy[0]:.3f})"
    kl = _ends(rows, "actor/kl")
    if kl and kl[1] > KL_LIMIT:
        found["kl"] = f"KL to the reference is {kl[1]:.2f} per token (over {KL_LIMIT:g})"
    fmt, correct = _ends(rows, "reward/format"), _ends(rows, "reward/correct")
    if fmt and correct and fmt[1] - fmt[0] >= FORMAT_RISE and correct[1] < correct[0]:
        found["format_not_correct"] = (
            f"the format reward rose {fmt[0]:.2f} -> {fmt[1]:.2f} while the correct one fell "
            f"{correct[0]:.2f} -> {correct[1]:.2f}"
        )
    scores = [s for s in map(validation_score, rows) if s is not None]
    if len(scores) >= 3 and scores[-1][1] < scores[0][1] < max(v for _, v in scores[1:-1]):
        name, first = scores[0]
        found["validation"] = (
            f"{name} {abs(scores[-1][1]):.3f} fell below its step-0 value {abs(first):.3f} "
            f"(best {abs(max(v for _, v in scores)):.3f})"
        )
    return found


@dataclass
class CollapseWatch:
    """The signals reported so far in a run; `update` returns the ones that are new."""

    reported: set[str] = field(default_factory=set)

    def update(self, rows: Sequence[dict[str, Any]]) -> dict[str, str]:
        new = {k: v for k, v in collapse_signals(rows).items() if k not in self.reported}
        self.reported |= set(new)
        return new


def first_trips(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Each signal and the step at which it first tripped (what `roll plot` marks).

    >>> rows = [{"step": s, "response_length/mean": n} for s, n in enumerate([24, 26, 9, 3], 1)]
    >>> first_trips(rows)
    {'length': 4}
    """
    watch, found = CollapseWatch(), {}
    for n, row in enumerate(rows, 1):
        for name in watch.update(rows[:n]):
            found[name] = int(row.get("step", n))
    return found

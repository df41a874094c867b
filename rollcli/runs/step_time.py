"""What a run's steps took, as the live line and the end-of-run summary show it.

`time/step_s` is a step's whole wall time, its validation included (`time/validate_s`,
every `run.eval_every` steps and at the last one). The live line's `s/step` and the
summary's `mean step time` are the training step alone, without validation, so that the
two agree; the summary gives validation its own row. Neither counts the setup before step 1
(Ray, the workers, loading the model) or step 0's baseline validation: the wall time does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


def training_step_s(row: dict[str, Any]) -> float | None:
    """A metrics row's step time without its validation (None: the row has no step time).

    >>> training_step_s({"step": 15, "time/step_s": 105.7, "time/validate_s": 95.0})
    10.7
    >>> training_step_s({"step": 0, "time/validate_s": 95.0}) is None
    True
    """
    step_s = row.get("time/step_s")
    if not isinstance(step_s, (int, float)):
        return None
    return round(step_s - (row.get("time/validate_s") or 0.0), 6)


@dataclass(frozen=True)
class StepTimes:
    """A run's steps: the mean training step (no validation) and validation's total."""

    mean_step_s: float | None
    steps: int
    validate_s: float
    validations: int

    @classmethod
    def of(cls, rows: Iterable[dict[str, Any]]) -> StepTimes:
        """From a run's metrics rows (`metrics.jsonl`), step 0's baseline included.

        >>> rows = [{"step": 0, "time/validate_s": 90.0},
        ...         {"step": 1, "time/step_s": 10.0},
        ...         {"step": 2, "time/step_s": 100.0, "time/validate_s": 89.0}]
        >>> StepTimes.of(rows)
        StepTimes(mean_step_s=10.5, steps=2, validate_s=179.0, validations=2)
        """
        rows = list(rows)
        train = [t for t in map(training_step_s, rows) if t is not None]
        validate = [
            r["time/validate_s"] for r in rows if isinstance(r.get("time/validate_s"), (int, float))
        ]
        return cls(
            sum(train) / len(train) if train else None, len(train), sum(validate), len(validate)
        )

"""The time a run has left, as its live bar and progress lines show it: steady, not swinging.

The live bar took rich's estimate, from the last 30 s of progress, and the plain lines the
rate since the run started; a validation step many times a training step then swung the
estimate from one line to the next (`eta 1h44m` on a ~5-minute run), and a long baseline
validation stretched it for the whole run. The two parts of a run are estimated apart here
and added:

    eta = steps left · mean step (the wall time from one step's end to the next's, its
          validation taken out: checkpoints and logging count, validation does not)
        + validations left · mean validation (step 0's baseline included)

The validations left are those of the steps to come that `run.eval_every` validates, and
the last step's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def validations_left(done: int, total: int, every: int) -> int:
    """Validations in steps `done + 1 .. total`: every `every`-th step, and the last.

    >>> validations_left(0, 40, 10), validations_left(35, 40, 10), validations_left(3, 40, 0)
    (4, 1, 1)
    >>> validations_left(0, 25, 10), validations_left(40, 40, 10)
    (3, 0)
    """
    if done >= total:
        return 0
    due = (total // every - done // every) if every > 0 else 0
    return due + (0 if every > 0 and total % every == 0 else 1)


@dataclass
class StepEta:
    """Fed each step's end (`step_done`), gives the seconds left (`seconds_left`).

    >>> eta = StepEta(total_steps=10, eval_every=5)
    >>> eta.start(0, now=0.0)
    >>> eta.step_done(0, {"time/validate_s": 30.0}, now=30.0)  # the baseline
    >>> eta.step_done(1, {}, now=40.0)
    >>> eta.seconds_left()  # 9 steps of 10 s, validations at 5 and 10 of 30 s
    150.0
    """

    total_steps: int
    eval_every: int = 0
    step_s: list[float] = field(default_factory=list)
    validate_s: list[float] = field(default_factory=list)
    done: int = 0
    last: float | None = None  # when the previous step (or the baseline) ended

    def start(self, start_step: int, now: float) -> None:
        self.done, self.last = start_step, now

    def step_done(self, step: int, metrics: dict[str, Any], now: float) -> None:
        validate = metrics.get("time/validate_s")
        validate = float(validate) if isinstance(validate, (int, float)) else 0.0
        if validate:
            self.validate_s.append(validate)
        if step > 0 and self.last is not None:
            self.step_s.append(max(0.0, now - self.last - validate))
            self.done = step
        self.last = now

    def seconds_left(self) -> float | None:
        """None before the first step has ended (nothing to go by)."""
        if not self.step_s:
            return None
        step = sum(self.step_s) / len(self.step_s)
        validate = sum(self.validate_s) / len(self.validate_s) if self.validate_s else 0.0
        left = max(0, self.total_steps - self.done)
        return left * step + validations_left(self.done, self.total_steps, self.eval_every) * (
            validate
        )

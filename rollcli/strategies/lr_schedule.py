"""The learning rate over a run: a linear warm-up over optimizer steps, then a decay over the
run's training steps (`train.lr_schedule`).

The warm-up counts optimizer steps (as `train.warmup_steps` always has); the decay counts
training steps (one `update` of the trainer per pipeline step), because how many optimizer
steps a training step takes varies (mini-batches, epochs, dynamic sampling). `LrFactor` is
the multiplier torch's `LambdaLR` applies to `train.lr`; it is a callable object, so its
attributes (the count of updates) travel in the scheduler's state dict and a resumed run
continues the same curve (hf and DeepSpeed checkpoints alike).
"""

from __future__ import annotations

import math
from typing import Any, Literal

import torch

Schedule = Literal["constant", "linear", "cosine"]
SCHEDULES: tuple[str, ...] = ("constant", "linear", "cosine")


class LrFactor:
    """`factor(opt_step)` = warm-up(opt_step) x decay(updates).

    The decay holds 1 until the last `decay_steps` of `total_steps` updates (all of them when
    None), then falls to `min_lr_ratio` linearly or on a half cosine; the update after the
    last is at `min_lr_ratio`.

    >>> f = LrFactor(total_steps=10, schedule="linear", decay_steps=4)
    >>> [round(f.decay(u), 2) for u in range(10)]
    [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25]
    """

    def __init__(
        self,
        *,
        warmup_steps: int = 0,
        total_steps: int = 1,
        schedule: Schedule = "constant",
        decay_steps: int | None = None,
        min_lr_ratio: float = 0.0,
    ) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown lr schedule {schedule!r}; choose one of {SCHEDULES}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.schedule = schedule
        self.decay_steps = total_steps if decay_steps is None else min(decay_steps, total_steps)
        self.min_lr_ratio = min_lr_ratio
        self.updates = 0  # trainer updates finished (training steps)

    def warmup(self, opt_step: int) -> float:
        if self.warmup_steps <= 0:
            return 1.0
        return min(1.0, (opt_step + 1) / self.warmup_steps)

    def decay(self, update: int) -> float:
        if self.schedule == "constant" or self.decay_steps <= 0:
            return 1.0
        start = self.total_steps - self.decay_steps
        done = min(1.0, max(0.0, (update - start) / self.decay_steps))
        shape = 1.0 - done if self.schedule == "linear" else 0.5 * (1 + math.cos(math.pi * done))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * shape

    def __call__(self, opt_step: int) -> float:
        return self.warmup(opt_step) * self.decay(self.updates)


def finish_update(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """Count one training step done and set the rate the next one starts with (LambdaLR set
    it at its last `step()` from the old count)."""
    factor: Any = scheduler.lr_lambdas[0]
    factor.updates += 1
    lrs = [base * factor(scheduler.last_epoch) for base in scheduler.base_lrs]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs, strict=True):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() reports

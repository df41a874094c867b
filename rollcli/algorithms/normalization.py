"""Reward scaling that keeps state across steps, and magnitude clipping."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def clip_abs(x: Tensor, bound: float | None) -> Tensor:
    """Clamp `x` to `[-bound, bound]`; `bound=None` returns `x` unchanged.

    Used for `algorithm.reward_clip` (on scores) and `algorithm.advantage_clip`.
    """
    if bound is None:
        return x
    if bound <= 0:
        raise ValueError(f"clip bound must be > 0, got {bound}")
    return x.clamp(-bound, bound)


class RunningMeanStd:
    """Running mean and variance of a scalar stream (`algorithm.norm_mode: running`).

    Batches are merged with the parallel update of Chan et al. (1979): for the current
    `(mean, var, count)` and a batch `(m_b, v_b, n_b)` (population variance),

        delta = m_b - mean,  N = count + n_b
        mean' = mean + delta * n_b / N
        var'  = (var * count + v_b * n_b + delta^2 * count * n_b / N) / N

    `normalize(x)` returns `(x - mean) / sqrt(var + eps)` (or `x / sqrt(var + eps)` when
    `shift_mean=False`), updating the statistics with `x` first by default.
    """

    def __init__(self, eps: float = 1e-8) -> None:
        self.eps = eps
        self.mean = 0.0
        self.var = 1.0
        self.count = 0

    @property
    def std(self) -> float:
        return math.sqrt(self.var + self.eps)

    def update(self, x: Tensor) -> None:
        x = x.detach().double().reshape(-1)
        n_b = x.numel()
        if n_b == 0:
            return
        m_b = float(x.mean())
        v_b = float(x.var(unbiased=False))
        if self.count == 0:
            self.mean, self.var, self.count = m_b, v_b, n_b
            return
        total = self.count + n_b
        delta = m_b - self.mean
        self.mean += delta * n_b / total
        self.var = (self.var * self.count + v_b * n_b + delta**2 * self.count * n_b / total) / total
        self.count = total

    @torch.no_grad()
    def normalize(self, x: Tensor, update: bool = True, shift_mean: bool = True) -> Tensor:
        if update:
            self.update(x)
        centered = x - self.mean if shift_mean else x
        return centered / self.std

    def state_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "var": self.var, "count": self.count, "eps": self.eps}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.mean = float(state["mean"])
        self.var = float(state["var"])
        self.count = int(state["count"])
        self.eps = float(state.get("eps", self.eps))

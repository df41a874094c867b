"""reward: scores finished samples with a reward function, one bad sample never fatal."""

from __future__ import annotations

from typing import Any

from rollcli.rewards.registry import load_reward_fn
from rollcli.rewards.runner import score_samples


class RewardWorker:
    def __init__(
        self, fn: str, *, options: dict[str, Any] | None = None, timeout_s: float = 10.0
    ) -> None:
        self.fn = load_reward_fn(fn)
        self.options = dict(options or {})
        self.timeout_s = timeout_s

    def score(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each sample: `{"response", "answer", ...fields}` → `{"score", ..., "error"}`."""
        return score_samples(self.fn, samples, self.options, self.timeout_s)

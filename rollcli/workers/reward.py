"""reward: scores finished samples with a reward function, one bad sample never fatal."""

from __future__ import annotations

import time
from typing import Any

from rollcli.rewards.registry import load_reward_fn
from rollcli.rewards.runner import score_samples


class RewardWorker:
    def __init__(
        self,
        fn: str,
        *,
        options: dict[str, Any] | None = None,
        timeout_s: float = 10.0,
        convention: str = "auto",
    ) -> None:
        """`convention`: how the function is called (`reward.convention`; `auto`: from its
        parameters, rollcli/rewards/conventions.py)."""
        self.fn = load_reward_fn(fn)
        self.options = dict(options or {})
        self.timeout_s = timeout_s
        self.convention = convention

    def score_sample(self, sample: dict[str, Any]) -> dict:
        """Score one finished sample (`{"response", "answer", ...fields}`), sent by
        actor_infer the moment it ends: `{"result", "start", "end"}` (wall-clock)."""
        start = time.time()
        result = self.score([sample])[0]
        return {"result": result, "start": start, "end": time.time()}

    def score(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each sample: `{"response", "answer", ...fields}` → `{"score", ..., "error"}`."""
        return score_samples(self.fn, samples, self.options, self.timeout_s, self.convention)

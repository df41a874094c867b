"""reward: scores finished samples with a reward function, one bad sample never fatal."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rollcli.rewards.registry import load_reward_fn
from rollcli.rewards.runner import score_samples


@dataclass(frozen=True)
class RewardArgs:
    """`fn`: a registered reward name or `"package.module:function"` (the recipe's
    `reward.fn`); `options`: the reward function's own keyword arguments, as the user wrote
    them (`reward.options`); `convention`: how the function is called (`reward.convention`;
    `auto`: from its parameters, rollcli/rewards/conventions.py)."""

    fn: str
    options: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 10.0
    convention: str = "auto"


class RewardWorker:
    def __init__(self, args: RewardArgs) -> None:
        self.fn = load_reward_fn(args.fn)
        self.options = dict(args.options)
        self.timeout_s = args.timeout_s
        self.convention = args.convention

    def score_sample(self, sample: dict[str, Any]) -> dict:
        """Score one finished sample (`{"response", "answer", ...fields}`), sent by
        actor_infer the moment it ends: `{"result", "start", "end"}` (wall-clock)."""
        start = time.time()
        result = self.score([sample])[0]
        return {"result": result, "start": start, "end": time.time()}

    def score(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each sample: `{"response", "answer", ...fields}` → `{"score", ..., "error"}`."""
        return score_samples(self.fn, samples, self.options, self.timeout_s, self.convention)

"""reward: scores finished samples with a reward function, one bad sample never fatal."""

from __future__ import annotations

import time
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

    def score_request(self, request: dict[str, Any], meta: list[dict[str, Any]]) -> dict:
        """Score a finished generation request (`ActorInferWorker.generate_request`'s
        output, handed over by Ray as soon as it is ready): sample `i` gets the fields
        `meta[prompt_index]` plus its response. Returns the request with `results` and the
        scoring's wall-clock interval."""
        start = time.time()
        if request.get("aborted"):
            return {**request, "results": None, "reward_start": start, "reward_end": start}
        samples = [{**meta[g["prompt_index"]], "response": g["text"]} for g in request["gens"]]
        results = self.score(samples)
        return {**request, "results": results, "reward_start": start, "reward_end": time.time()}

    def score(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each sample: `{"response", "answer", ...fields}` → `{"score", ..., "error"}`."""
        return score_samples(self.fn, samples, self.options, self.timeout_s)

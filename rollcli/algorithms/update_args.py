"""Flat arguments of the actor's update and of the RL objective (`algorithms/objective.py`);
the RL pipeline builds them from the recipe (`pipelines/rl/update_args.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.algorithms.off_policy import Correction, Level


@dataclass(frozen=True)
class PolicyUpdateArgs:
    policy_loss: str = "ppo"
    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    loss_agg: str = "token-mean"
    entropy_coef: float = 0.0
    kl_loss_coef: float = 0.0  # > 0 only when the KL penalty is placed in the loss
    kl_estimator: str = "k3"
    epochs: int = 1
    mini_batch_size: int | None = None
    micro_batch_size: int = 8
    micro_batch_tokens: int | None = (
        None  # padded tokens per micro-batch (train.micro_batch_tokens)
    )
    temperature: float = 1.0
    norm_len: int | None = None
    # the off-policy correction against the sampler's log-probs (rollcli.algorithms.off_policy)
    correction: Correction = "none"
    correction_level: Level = "token"
    correction_cap: float = 2.0
    correction_band: tuple[float, float] = (0.5, 2.0)  # icepop's, and the mismatch metrics'
    shared_prefix: bool = False  # each group's prompt computed once (rollcli.data.shared_prefix)

    def forward_sizes(self) -> dict[str, Any]:
        """`compute_logprobs` arguments (reference and old log-probs) matching the update."""
        return {
            "micro_batch_size": self.micro_batch_size,
            "temperature": self.temperature,
            "max_tokens": self.micro_batch_tokens,
            "shared_prefix": self.shared_prefix,
        }

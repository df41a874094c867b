"""Flat arguments of the actor's update, built by pipeline setup from the recipe."""

from __future__ import annotations

from dataclasses import dataclass


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
    tis_cap: float | None = None  # truncated importance sampling against the sampler's log-probs

"""Flat arguments of the actor's update, built by pipeline setup from the recipe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rollcli.algorithms.off_policy import Correction, Level
    from rollcli.config.recipe import RecipeConfig


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

    @classmethod
    def from_recipe(cls, cfg: RecipeConfig) -> PolicyUpdateArgs:
        """The update's arguments from the recipe's algorithm, train and rollout sections
        (the off-policy correction stays off: pipelines that support it set `correction`)."""
        alg, train = cfg.algorithm, cfg.train
        return cls(
            policy_loss=alg.policy_loss,
            clip_low=alg.clip_low,
            clip_high=alg.clip_high,
            dual_clip=alg.dual_clip,
            loss_agg=alg.loss_agg,
            entropy_coef=alg.entropy_coef,
            kl_loss_coef=alg.kl_coef if alg.kl_in == "loss" else 0.0,
            kl_estimator=alg.kl_estimator,
            epochs=alg.ppo_epochs,
            mini_batch_size=train.mini_batch_size,
            micro_batch_size=train.micro_batch_size,
            micro_batch_tokens=train.micro_batch_tokens,
            # Dr. GRPO's constant: the generation budget (an agentic response spans turns:
            # there the batch's padded response width, see ActorTrainWorker.train_step)
            norm_len=alg.loss_norm_len
            or (cfg.rollout.max_new_tokens if cfg.pipeline == "rlvr" else None),
            temperature=cfg.rollout.temperature or 1.0,
            shared_prefix=cfg.shared_prefix,
        )

    def forward_sizes(self) -> dict[str, Any]:
        """`compute_logprobs` arguments (reference and old log-probs) matching the update."""
        return {
            "micro_batch_size": self.micro_batch_size,
            "temperature": self.temperature,
            "max_tokens": self.micro_batch_tokens,
            "shared_prefix": self.shared_prefix,
        }

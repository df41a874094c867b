"""Flat arguments of the actor's update and of the RL objective (`algorithms/objective.py`);
the RL pipeline builds them from the recipe (`pipelines/rl/update_args.py`), passing every
field. A field left out (tests, benchmarks) takes the recipe's own default, read from the
config layer (`DEFAULT`), never a second default written here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.algorithms.off_policy import Correction, Level
from rollcli.config.algorithm import AlgorithmConfig, resolved_correction
from rollcli.config.precision_spec import FP32
from rollcli.config.sections import RolloutConfig, TrainConfig

# the recipe's defaults: an algorithm, train and rollout section that set nothing
_ALG, _TRAIN, _ROLLOUT = AlgorithmConfig(), TrainConfig(), RolloutConfig()


@dataclass(frozen=True)
class PolicyUpdateArgs:
    policy_loss: str = _ALG.policy_loss
    clip_low: float = _ALG.clip_low
    clip_high: float = _ALG.clip_high
    dual_clip: float | None = _ALG.dual_clip
    loss_agg: str = _ALG.loss_agg
    entropy_coef: float = _ALG.entropy_coef
    kl_loss_coef: float = 0.0  # > 0 only when the KL penalty is placed in the loss
    kl_estimator: str = _ALG.kl_estimator
    epochs: int = _ALG.ppo_epochs
    mini_batch_size: int | None = _TRAIN.mini_batch_size
    micro_batch_size: int = _TRAIN.micro_batch_size
    micro_batch_tokens: int | None = _TRAIN.micro_batch_tokens  # padded tokens per micro-batch
    temperature: float = _ROLLOUT.temperature
    norm_len: int | None = _ALG.loss_norm_len
    # the off-policy correction against the sampler's log-probs (rollcli.algorithms.off_policy):
    # what `auto` resolves to for the fp32 rollout
    correction: Correction = resolved_correction(_ALG, FP32)  # type: ignore[assignment]
    correction_level: Level = _ALG.off_policy.level
    correction_cap: float = _ALG.off_policy.cap
    correction_band: tuple[float, float] = _ALG.off_policy.band  # icepop's, and the metrics'
    shared_prefix: bool = False  # each group's prompt computed once (rollcli.data.shared_prefix)
    # an MoE model's router losses (None: the model config's `router_aux_loss_coef`)
    moe_aux_coef: float | None = _ALG.moe_aux_coef
    moe_z_coef: float = _ALG.moe_z_coef

    def forward_sizes(self) -> dict[str, Any]:
        """`compute_logprobs` arguments (reference and old log-probs) matching the update."""
        return {
            "micro_batch_size": self.micro_batch_size,
            "temperature": self.temperature,
            "max_tokens": self.micro_batch_tokens,
            "shared_prefix": self.shared_prefix,
        }

"""Named algorithm presets: `algorithm: {name: dapo, clip_high: 0.3}` in a recipe.

A preset only sets defaults; every key the user writes wins. Knobs a preset leaves
out keep the `AlgorithmConfig` defaults (which are the `grpo` preset). This module
imports no torch.
"""

from __future__ import annotations

import difflib
from typing import Any

from rollcli.config.algorithm import AlgorithmConfig

_GROUP_PPO: dict[str, Any] = {"advantage": "grpo", "policy_loss": "ppo"}

PRESETS: dict[str, dict[str, Any]] = {
    # PPO with a critic and GAE; KL in the reward (Ouyang et al. 2022).
    "ppo": {
        "advantage": "gae",
        "gamma": 1.0,
        "lam": 0.95,
        "whiten_advantages": True,
        "policy_loss": "ppo",
        "loss_agg": "token-mean",
        "value_clip": 0.2,
        "kl_coef": 0.001,
        "kl_in": "reward",
        "kl_estimator": "k1",
    },
    # GRPO (Shao et al. 2024): group-normalised outcome, k3 KL in the loss.
    "grpo": {
        **_GROUP_PPO,
        "norm_std": True,
        "loss_agg": "seq-mean-token-mean",
        "kl_coef": 0.001,
        "kl_in": "loss",
        "kl_estimator": "k3",
    },
    # Dr. GRPO (Liu et al. 2025): no std division, no per-length normalisation.
    "drgrpo": {
        **_GROUP_PPO,
        "norm_std": False,
        "loss_agg": "seq-mean-token-sum-norm",
        "kl_coef": 0.0,
    },
    # DAPO (Yu et al. 2025): clip-higher, token-mean, dynamic sampling, overlong shaping.
    "dapo": {
        **_GROUP_PPO,
        "norm_std": True,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "loss_agg": "token-mean",
        "kl_coef": 0.0,
        "dynamic_sampling": True,
        "overlong_buffer": 0.2,
        "overlong_penalty": 1.0,
    },
    # RLOO (Ahmadian et al. 2024): leave-one-out baseline, KL in the reward.
    "rloo": {
        "advantage": "rloo",
        "policy_loss": "ppo",
        "loss_agg": "token-mean",
        "kl_coef": 0.001,
        "kl_in": "reward",
        "kl_estimator": "k1",
    },
    # REINFORCE++ (Hu et al. 2025): global whitening of returns, KL in the reward.
    "reinforce_pp": {
        "advantage": "reinforce_pp",
        "policy_loss": "ppo",
        "loss_agg": "token-mean",
        "kl_coef": 0.001,
        "kl_in": "reward",
        "kl_estimator": "k1",
    },
    # REINFORCE++-baseline: group-mean baseline, then global whitening; k2 KL in the loss.
    "reinforce_pp_baseline": {
        "advantage": "reinforce_pp_baseline",
        "policy_loss": "ppo",
        "loss_agg": "token-mean",
        "kl_coef": 0.001,
        "kl_in": "loss",
        "kl_estimator": "k2",
    },
    # GSPO (Zheng et al. 2025): sequence-level ratio with tiny clip ranges.
    "gspo": {
        "advantage": "grpo",
        "policy_loss": "gspo",
        "clip_low": 3e-4,
        "clip_high": 4e-4,
        "loss_agg": "seq-mean-token-mean",
        "kl_coef": 0.0,
    },
    # TOPR (Le Roux et al. 2025): mean baseline, so failures get negative advantages.
    "topr": {
        "advantage": "grpo",
        "norm_std": False,
        "policy_loss": "topr",
        "loss_agg": "token-mean",
        "kl_coef": 0.0,
    },
    # RAFT++ (Xiong et al. 2025): PPO clip on the positively rewarded samples only.
    "raftpp": {
        "advantage": "reinforce",
        "policy_loss": "raftpp",
        "loss_agg": "token-mean",
        "kl_coef": 0.0,
    },
    # Plain REINFORCE (Williams 1992): reward-to-go, vanilla policy gradient.
    "reinforce": {
        "advantage": "reinforce",
        "policy_loss": "pg",
        "loss_agg": "token-mean",
        "kl_coef": 0.0,
    },
}


def resolve_algorithm(user: dict[str, Any] | None = None) -> AlgorithmConfig:
    """Merge the preset `user["name"]` (default `grpo`) with the user's keys and validate.

    Raises `ValueError` naming the closest preset for an unknown name, and pydantic's
    `ValidationError` for unknown knobs or bad values.

    >>> resolve_algorithm({"name": "dapo", "clip_high": 0.3}).clip_high
    0.3
    """
    user = dict(user or {})
    name = user.get("name", "grpo")
    if name not in PRESETS:
        close = difflib.get_close_matches(str(name), list(PRESETS), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(
            f"unknown algorithm preset {name!r}{hint} (presets: {', '.join(sorted(PRESETS))})"
        )
    return AlgorithmConfig.model_validate({**PRESETS[name], **user, "name": name})

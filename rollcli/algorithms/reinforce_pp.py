"""REINFORCE++ (Hu et al. 2025, arXiv:2501.03262): global batch normalisation.

Instead of a critic or a per-prompt std, advantages are whitened over every real token
of the whole batch, which the paper finds more stable than per-group normalisation.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rollcli.algorithms.group import group_mean
from rollcli.algorithms.masked import masked_whiten
from rollcli.algorithms.returns import reinforce_return
from rollcli.algorithms.token_rewards import token_rewards_from_scores


@torch.no_grad()
def reinforce_pp_advantages(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """REINFORCE++: discounted return, then whitening over all real tokens of the batch.

        G_t = sum_{t' >= t} gamma^(t'-t) r_t'
        A_t = (G_t - mean_batch(G)) / std_batch(G)

    `token_rewards` carries the score on the last token and, with KL-in-reward, the
    per-token penalty (see `token_rewards_from_scores`). Returns `[B, T]`, 0 where masked.
    """
    returns = reinforce_return(token_rewards, mask, gamma)
    return masked_whiten(returns, mask)


@torch.no_grad()
def reinforce_pp_baseline_advantages(
    scores: Tensor,
    mask: Tensor,
    group_size: int,
    kl_rewards: Tensor | None = None,
    gamma: float = 1.0,
) -> Tensor:
    """REINFORCE++-baseline: group-mean baseline, then global whitening.

        R'_i = R_i - mean_g(R)                      (placed on the last real token)
        r_t  = R'_i * [t last] + k_t
        A_t  = whiten_batch( sum_{t' >= t} gamma^(t'-t) r_t' )

    `kl_rewards` `[B, T]` is the optional per-token KL reward `-kl_coef * kl` (subtracted
    token-wise before whitening, as in REINFORCE++); None when KL is in the loss.
    """
    centered = scores.float() - group_mean(scores.float(), group_size)
    rewards = token_rewards_from_scores(centered, mask)
    if kl_rewards is not None:
        rewards = rewards + kl_rewards.to(rewards.dtype) * mask.to(rewards.dtype)
    return masked_whiten(reinforce_return(rewards, mask, gamma), mask)

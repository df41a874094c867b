"""Moving between sequence-level `[B]` and token-level `[B, T]` quantities."""

from __future__ import annotations

import torch
from torch import Tensor


def last_token_index(mask: Tensor) -> Tensor:
    """Index of the last real token of each row `[B]` (0 for an all-masked row)."""
    positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, torch.zeros_like(positions)).amax(dim=-1)


def broadcast_to_tokens(seq_values: Tensor, mask: Tensor) -> Tensor:
    """`seq_values` `[B]` copied onto every real token: `out[i, t] = v_i * mask[i, t]`."""
    if seq_values.dim() != 1 or seq_values.shape[0] != mask.shape[0]:
        raise ValueError(
            f"expected [B] values for a [B, T] mask; got {tuple(seq_values.shape)} "
            f"and {tuple(mask.shape)}"
        )
    dtype = seq_values.dtype if seq_values.is_floating_point() else torch.float32
    return seq_values.to(dtype).unsqueeze(-1) * mask.to(dtype)


def token_rewards_from_scores(
    scores: Tensor, mask: Tensor, kl: Tensor | None = None, kl_coef: float = 0.0
) -> Tensor:
    """Dense reward `[B, T]` for token-level estimators (KL-in-reward, as in InstructGPT).

        r_t = score * [t is the last real token] - kl_coef * kl_t * mask_t

    `kl` is the per-token estimate from `kl_estimate` (`[B, T]`); it is only read when
    given and `kl_coef > 0`. Rows with no real token get no score.
    """
    if scores.dim() != 1 or scores.shape[0] != mask.shape[0]:
        raise ValueError(
            f"expected [B] scores for a [B, T] mask; got {tuple(scores.shape)} "
            f"and {tuple(mask.shape)}"
        )
    m = mask.to(torch.float32 if not scores.is_floating_point() else scores.dtype)
    rewards = torch.zeros_like(m)
    has_tokens = m.sum(dim=-1) > 0
    rows = torch.arange(m.shape[0], device=m.device)
    rewards[rows, last_token_index(mask)] = torch.where(has_tokens, scores.to(m.dtype), 0.0)
    if kl is not None and kl_coef > 0:
        rewards = rewards - kl_coef * kl.to(m.dtype) * m
    return rewards

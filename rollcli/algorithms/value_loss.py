"""The critic's loss for PPO with GAE."""

from __future__ import annotations

import torch
from torch import Tensor

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.masked import masked_mean


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float | None = None,
    agg: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Clipped value loss (PPO, Schulman et al. 2017; clipping as in OpenAI baselines).

        V_clip = V_old + clip(V - V_old, -clip, clip)
        L_t    = 1/2 max((V - R)^2, (V_clip - R)^2)       (clip given)
        L_t    = 1/2 (V - R)^2                            (clip None)

    `values` are the critic's current predictions (with gradient), `old_values` those
    recorded when the batch was made, `returns` the GAE targets. Metrics: `vf_loss`,
    `vf_clipfrac` (share of real tokens where the clipped term was larger), `vpred_mean`.
    """
    m = mask.to(values.dtype)
    target = returns.detach()
    unclipped = (values - target).square()
    if clip is None:
        loss_mat = 0.5 * unclipped
        clipfrac = 0.0
    else:
        if clip <= 0:
            raise ValueError(f"value clip must be > 0, got {clip}")
        old = old_values.detach()
        clipped_values = old + (values - old).clamp(-clip, clip)
        clipped = (clipped_values - target).square()
        loss_mat = 0.5 * torch.maximum(unclipped, clipped)
        clipfrac = float(masked_mean((clipped > unclipped).float(), m))
    loss = aggregate_loss(loss_mat, m, agg, norm_len)
    return loss, {
        "vf_loss": float(loss.detach()),
        "vf_clipfrac": clipfrac,
        "vpred_mean": float(masked_mean(values.detach(), m)),
    }

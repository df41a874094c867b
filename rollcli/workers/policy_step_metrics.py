"""The weights of actor_train's policy-step metrics: what makes each one a mean over the
whole batch once the trainer averages micro-batches (`strategies/step_metrics.py`)."""

from __future__ import annotations

import torch


def metric_weights(
    metrics: dict[str, float],
    mask: torch.Tensor,
    agg_mask: torch.Tensor,
    ent_mask: torch.Tensor,
    pg_share: float,
) -> dict[str, tuple[float, float]]:
    """Each policy-step metric of a micro-batch with the weight that makes the trainer's
    weighted mean (`strategies/step_metrics.py`) the whole batch's: `pg_loss` its share of
    the mini-batch's loss (the weighted mean is the mini-batch's loss); the loss's ratio
    metrics (`clipfrac`, `ratio_mean`, ...) its tokens in the loss (`agg_mask`: raftpp's
    positive ones); `entropy`, `kl`, `tis_*` and `keep_frac` its real tokens;
    `seq_ratio_mean` its sequences; `action_entropy` its action tokens."""
    tokens = float(mask.sum())
    weights = {
        "pg_loss": pg_share,
        "entropy": tokens,
        "kl": tokens,
        "tis_ratio_mean": tokens,
        "tis_clipped_frac": tokens,
        "keep_frac": tokens,
        "seq_ratio_mean": float((mask.sum(dim=-1) > 0).sum()),
        "action_entropy": float(ent_mask.sum()),
    }
    loss_tokens = float(agg_mask.sum())
    return {k: (v, weights.get(k, loss_tokens)) for k, v in metrics.items()}

"""How a loss reports its metrics, and the weights of the RL objective's: what makes each
one a mean over the whole batch once the trainer averages micro-batches
(`strategies/step_metrics.py` does the averaging).

A metric is a float (averaged over the micro-batches that report it), a `(value, weight)`
pair (a weighted mean over every micro-batch of the update) or an `Extreme` (the smallest
or largest over all of them).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch


class Extreme(NamedTuple):
    """A micro-batch's extreme: the update reports the `op` (min or max) over all of them."""

    value: float
    op: Literal["min", "max"]


Metric = float | tuple[float, float] | Extreme  # a value, (value, weight), or an extreme


def metric_weights(
    metrics: dict[str, float],
    mask: torch.Tensor,
    agg_mask: torch.Tensor,
    ent_mask: torch.Tensor,
    pg_share: float,
) -> dict[str, Metric]:
    """Each policy-step metric of a micro-batch with the weight that makes the trainer's
    weighted mean (`strategies/step_metrics.py`) the whole batch's: `pg_loss` its share of
    the mini-batch's loss (the weighted mean is the mini-batch's loss); the loss's ratio
    metrics (`clipfrac`, `ratio_mean`, ...) its tokens in the loss (`agg_mask`: raftpp's
    positive ones); `entropy`, `kl`, `mismatch_*`, `off_policy_*` and `keep_frac` its real
    tokens; `seq_ratio_mean` its sequences; `action_entropy` its action tokens. The mismatch
    ratio's `_min` / `_max` are extremes (`Extreme`), left out of a micro-batch without tokens."""
    tokens = float(mask.sum())
    weights = {
        "pg_loss": pg_share,
        "entropy": tokens,
        "kl": tokens,
        "mismatch_kl": tokens,
        "mismatch_ratio_mean": tokens,
        "mismatch_outside_band": tokens,
        "off_policy_weight_mean": tokens,
        "off_policy_corrected_frac": tokens,
        "keep_frac": tokens,
        "seq_ratio_mean": float((mask.sum(dim=-1) > 0).sum()),
        "action_entropy": float(ent_mask.sum()),
    }
    loss_tokens = float(agg_mask.sum())
    out: dict[str, Metric] = {}
    for k, v in metrics.items():
        if k in EXTREMES:
            if tokens > 0:
                out[k] = Extreme(v, EXTREMES[k])
        else:
            out[k] = (v, weights.get(k, loss_tokens))
    return out


EXTREMES: dict[str, Literal["min", "max"]] = {
    "mismatch_ratio_min": "min",
    "mismatch_ratio_max": "max",
}

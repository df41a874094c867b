"""Preference losses on sequence log-probabilities: DPO, conservative DPO, IPO.

Inputs are per-pair sums of response-token log-probs under the policy (`pi_*`) and the
frozen reference (`ref_*`). With `h = (pi_c - ref_c) - (pi_r - ref_r)` (the policy's log
ratio of chosen over rejected, relative to the reference):

| loss | per pair | paper |
| --- | --- | --- |
| `sigmoid` | `-log sigmoid(beta h)` | DPO, Rafailov et al. 2023 (arXiv:2305.18290) |
| `cdpo` | `-(1-eps) log sigmoid(beta h) - eps log sigmoid(-beta h)` | conservative DPO, Mitchell 2023 ("A note on DPO with noisy preferences") |
| `ipo` | `(h - 1/(2 beta))^2` | IPO, Azar et al. 2023 (arXiv:2310.12036) |

`eps` (`label_smoothing`) is the assumed chance that a preference label is flipped. IPO
uses the average per-token log-probs, as its authors do (`pi_*` and `ref_*` then are
means, see `sequence_logprob`); the others use sums. The implicit rewards
`beta (pi - ref)` of chosen and rejected are returned as metrics.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from rollcli.algorithms.masked import masked_mean, masked_sum

DPO_LOSSES: tuple[str, ...] = ("sigmoid", "cdpo", "ipo")


def sequence_logprob(logprobs: Tensor, mask: Tensor, average: bool = False) -> Tensor:
    """`[B, R]` token log-probs → `[B]`: the sum over real tokens (mean when `average`)."""
    return masked_mean(logprobs, mask, dim=-1) if average else masked_sum(logprobs, mask, dim=-1)


def dpo_loss(
    pi_chosen: Tensor,
    pi_rejected: Tensor,
    ref_chosen: Tensor,
    ref_rejected: Tensor,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
) -> tuple[Tensor, dict[str, float]]:
    """Mean preference loss over the pairs (formulas in the module docstring) and metrics:
    `loss`, `rewards/chosen`, `rewards/rejected`, `rewards/margin`, `rewards/accuracy`
    (the fraction of pairs whose implicit reward ranks chosen strictly above rejected).
    """
    h = (pi_chosen - ref_chosen) - (pi_rejected - ref_rejected)
    if loss_type in ("sigmoid", "cdpo"):
        eps = label_smoothing if loss_type == "cdpo" else 0.0
        losses = -(1 - eps) * F.logsigmoid(beta * h) - eps * F.logsigmoid(-beta * h)
    elif loss_type == "ipo":
        losses = (h - 1 / (2 * beta)) ** 2
    else:
        raise ValueError(f"unknown DPO loss {loss_type!r}; choose one of {DPO_LOSSES}")
    loss = losses.mean()
    with torch.no_grad():
        chosen = beta * (pi_chosen - ref_chosen)
        rejected = beta * (pi_rejected - ref_rejected)
        metrics = {
            "loss": float(loss),
            "rewards/chosen": float(chosen.mean()),
            "rewards/rejected": float(rejected.mean()),
            "rewards/margin": float((chosen - rejected).mean()),
            "rewards/accuracy": float((chosen > rejected).float().mean()),
        }
    return loss, metrics

"""Loss aggregation: how a per-token loss matrix `[B, T]` becomes one scalar.

The choice changes how much each token and each sequence weighs in the gradient:

| mode | formula | used by |
| --- | --- | --- |
| `token-mean` | `sum_{i,t} m L / sum_{i,t} m` | DAPO (Yu et al. 2025), PPO in most RLHF code |
| `seq-mean-token-mean` | `1/B' sum_i (sum_t m L / sum_t m)` | GRPO (Shao et al. 2024, DeepSeekMath) |
| `seq-mean-token-sum` | `1/B sum_i sum_t m L` | sequence-level REINFORCE |
| `seq-mean-token-sum-norm` | `1/B sum_i sum_t m L / norm_len` | Dr. GRPO (Liu et al. 2025) |

`B'` counts only the sequences with at least one real token. `norm_len` is a constant
(default: `T`, the padded length) so that long answers are not down-weighted per token
the way `seq-mean-token-mean` does (the length bias Dr. GRPO removes).

Micro-batches (gradient accumulation) and data-parallel ranks each see part of a
mini-batch. Every mode is `numerator / denominator` with a numerator that sums over rows,
so a part's share of the mini-batch's loss is its own `aggregate_loss` times
`micro_batch_share`: its denominator over the mini-batch's (`loss_normalisers`, summed
over the ranks). The shares add up to the full mini-batch's loss exactly, whatever the
split, provided `norm_len` is the same constant in every part (not a trimmed width).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rollcli.algorithms.masked import masked_mean, masked_sum

LOSS_AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)


def aggregate_loss(
    loss_mat: Tensor, mask: Tensor, mode: str = "token-mean", norm_len: float | None = None
) -> Tensor:
    """Reduce `loss_mat` `[B, T]` to a scalar over the real tokens of `mask`.

    See the module docstring for the formulas. `norm_len` is read only by
    `seq-mean-token-sum-norm` (default `T = loss_mat.shape[-1]`).
    """
    if loss_mat.dim() != 2 or loss_mat.shape != mask.shape:
        raise ValueError(
            f"loss_mat and mask must both be [B, T]; got {tuple(loss_mat.shape)} "
            f"and {tuple(mask.shape)}"
        )
    m = mask.to(loss_mat.dtype)
    if mode == "token-mean":
        return masked_mean(loss_mat, m)
    batch = loss_mat.shape[0]
    if mode == "seq-mean-token-mean":
        per_seq = masked_mean(loss_mat, m, dim=-1)
        has_tokens = (m.sum(dim=-1) > 0).to(loss_mat.dtype)
        return masked_mean(per_seq, has_tokens)
    seq_sums = masked_sum(loss_mat, m, dim=-1)
    if mode == "seq-mean-token-sum":
        return seq_sums.sum() / batch
    if mode == "seq-mean-token-sum-norm":
        denom = float(loss_mat.shape[-1] if norm_len is None else norm_len)
        if denom <= 0:
            raise ValueError(f"norm_len must be > 0, got {norm_len}")
        return seq_sums.sum() / (batch * denom)
    raise ValueError(f"unknown loss aggregation mode {mode!r}; choose one of {LOSS_AGG_MODES}")


# which of `loss_normalisers`' counts each mode divides by
_DENOMINATOR = {
    "token-mean": 0,  # real tokens
    "seq-mean-token-mean": 1,  # sequences with at least one real token
    "seq-mean-token-sum": 2,  # rows (norm_len is a constant factor of both)
    "seq-mean-token-sum-norm": 2,
}


def loss_normalisers(mask: Tensor) -> Tensor:
    """The denominators of the modes for `mask` `[B, T]`: `[tokens, sequences with a
    token, rows]` (float64, on the CPU; sum them over data-parallel ranks).

    >>> loss_normalisers(torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])).tolist()
    [3.0, 2.0, 3.0]
    """
    per_row = mask.detach().to(device="cpu", dtype=torch.float64).sum(dim=-1)
    return torch.stack(
        [per_row.sum(), (per_row > 0).sum().to(torch.float64), torch.tensor(len(per_row) * 1.0)]
    )


def micro_batch_share(mode: str, mask: Tensor, totals: Tensor) -> float:
    """The factor that turns `aggregate_loss(loss_mat, mask, mode)` of a micro-batch into its
    share of the mini-batch's loss, whose `loss_normalisers` are `totals`.

    >>> totals = loss_normalisers(torch.tensor([[1, 1, 0], [1, 1, 1]]))
    >>> micro_batch_share("token-mean", torch.tensor([[1, 1, 0]]), totals)
    0.4
    """
    if mode not in _DENOMINATOR:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; choose one of {LOSS_AGG_MODES}")
    i = _DENOMINATOR[mode]
    return float(loss_normalisers(mask)[i] / totals[i].clamp(min=1.0))

"""Group baselines over the `n` samples of one prompt.

Samples of a group are contiguous: with group size `n`, rows `[k*n, (k+1)*n)` are the
`k`-th prompt's samples. Every function takes sequence scores `[B]` and returns `[B]`.
"""

from __future__ import annotations

import torch
from torch import Tensor

NORM_MODES: tuple[str, ...] = ("group", "batch", "none")


def group_view(scores: Tensor, group_size: int) -> Tensor:
    """`scores` `[B]` reshaped to `[B / n, n]`; raises if `B` is not a multiple of `n`."""
    if scores.dim() != 1:
        raise ValueError(f"scores must be [B], got shape {tuple(scores.shape)}")
    if group_size < 1 or scores.shape[0] % group_size != 0:
        raise ValueError(
            f"batch of {scores.shape[0]} samples does not split into groups of {group_size}"
        )
    return scores.reshape(-1, group_size)


@torch.no_grad()
def grpo_advantages(
    scores: Tensor, group_size: int, norm_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """GRPO outcome advantage (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300).

        A_i = (R_i - mean_g(R)) / (std_g(R) + eps)     (norm_std=True)
        A_i =  R_i - mean_g(R)                         (norm_std=False, Dr. GRPO)

    `std_g` is the unbiased (Bessel-corrected) standard deviation inside the group. With
    `group_size=1` there is no baseline to compare against and every advantage is 0.
    """
    groups = group_view(scores.float(), group_size)
    centered = groups - groups.mean(dim=-1, keepdim=True)
    if norm_std and group_size > 1:
        centered = centered / (groups.std(dim=-1, keepdim=True) + eps)
    return centered.reshape(-1)


@torch.no_grad()
def rloo_advantages(scores: Tensor, group_size: int) -> Tensor:
    """REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024, arXiv:2402.14740).

        A_i = R_i - 1/(n-1) * sum_{j != i} R_j  =  n/(n-1) * (R_i - mean_g(R))

    Needs `group_size >= 2`.
    """
    if group_size < 2:
        raise ValueError("rloo needs at least 2 samples per prompt (group_size >= 2)")
    groups = group_view(scores.float(), group_size)
    others_mean = (groups.sum(dim=-1, keepdim=True) - groups) / (group_size - 1)
    return (groups - others_mean).reshape(-1)


@torch.no_grad()
def normalize_scores(
    scores: Tensor, group_size: int, mode: str = "group", norm_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """Reward normalisation before an estimator (`algorithm.norm_mode`).

    `group`: `(R - mean_g) / (std_g + eps)` inside each prompt group (same as GRPO);
    `batch`: `(R - mean_B) / (std_B + eps)` over the whole batch;
    `none`: unchanged. The std division is skipped when `norm_std` is False. Running
    normalisation across steps is `RunningMeanStd` (it keeps state, so it is not here).
    """
    if mode == "none":
        return scores
    if mode == "group":
        return grpo_advantages(scores, group_size, norm_std=norm_std, eps=eps).to(scores.dtype)
    if mode == "batch":
        return grpo_advantages(scores, scores.shape[0], norm_std=norm_std, eps=eps).to(scores.dtype)
    raise ValueError(f"unknown normalisation mode {mode!r}; choose one of {NORM_MODES}")


def group_mean(scores: Tensor, group_size: int) -> Tensor:
    """Each sample's group mean `mean_g(R)`, broadcast back to `[B]`."""
    groups = group_view(scores, group_size)
    return groups.mean(dim=-1, keepdim=True).expand_as(groups).reshape(-1)

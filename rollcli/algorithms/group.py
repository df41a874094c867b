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


def centre_groups(groups: Tensor) -> Tensor:
    """`groups - mean_g` for `[G, n]` rows, exactly 0 for a row of equal values.

    A floating-point mean of equal values can be an ulp off them (eight 0.9s in fp32 average
    to 0.90000004), while their std is exactly 0, so `(R - mean) / (std + eps)` would give
    the whole group an advantage of ulp / eps (-0.056 at 0.9, 0.83 at 100.3) where it has no
    signal at all.

    >>> centre_groups(torch.full((1, 8), 0.9)).abs().max().item()
    0.0
    """
    centred = groups - groups.mean(dim=-1, keepdim=True)
    tied = (groups == groups[..., :1]).all(dim=-1, keepdim=True)
    return centred.masked_fill(tied, 0.0)


@torch.no_grad()
def grpo_advantages(
    scores: Tensor, group_size: int, norm_std: bool = True, eps: float = 1e-6
) -> Tensor:
    """GRPO outcome advantage (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300).

        A_i = (R_i - mean_g(R)) / (std_g(R) + eps)     (norm_std=True)
        A_i =  R_i - mean_g(R)                         (norm_std=False, Dr. GRPO)

    `std_g` is the unbiased (Bessel-corrected) standard deviation inside the group. With
    `group_size=1` there is no baseline to compare against and every advantage is 0, and so
    is it for every sample of a group whose scores are all equal (`centre_groups`).
    """
    groups = group_view(scores.float(), group_size)
    centred = centre_groups(groups)
    if norm_std and group_size > 1:
        centred = centred / (groups.std(dim=-1, keepdim=True) + eps)
    return centred.reshape(-1)


@torch.no_grad()
def rloo_advantages(scores: Tensor, group_size: int) -> Tensor:
    """REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024, arXiv:2402.14740).

        A_i = R_i - 1/(n-1) * sum_{j != i} R_j  =  n/(n-1) * (R_i - mean_g(R))

    Needs `group_size >= 2`. Computed as the right-hand side, so a group of equal scores
    gets exactly 0 (`centre_groups`).
    """
    if group_size < 2:
        raise ValueError("rloo needs at least 2 samples per prompt (group_size >= 2)")
    groups = group_view(scores.float(), group_size)
    return (centre_groups(groups) * (group_size / (group_size - 1))).reshape(-1)


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

"""Group filtering by reward variance (StarPO-S: Wang et al. 2025, RAGEN, arXiv:2504.20073).

A group whose samples all scored the same has no baseline-relative signal: its
group-centred advantage is 0 everywhere, and its tokens only dilute the loss of the groups
that do carry one. StarPO-S trains on the groups with the largest reward spread:

    keep the ceil(keep_frac * G) groups with the largest std_g(R), never one with std_g(R) = 0

Groups are ranked by their std rounded to 6 decimals, and ties go to the earlier group, so
float noise never decides between two groups of equal spread (the std is also taken over
each group's sorted scores: the same scores in another order give the same bits).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rollcli.algorithms.group import group_view

MIN_STD = 1e-6  # a group whose reward std is at most this has no spread (is not informative)


@torch.no_grad()
def group_reward_std(scores: Tensor, group_size: int) -> Tensor:
    """`std_g(R)` `[B / n]` (population std; any order of a group's scores gives the same bits).

    >>> group_reward_std(torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0]), 2).tolist()
    [0.5, 0.5, 0.0]
    """
    groups = group_view(scores.float(), group_size).sort(dim=-1).values
    return groups.std(dim=-1, correction=0)


@torch.no_grad()
def top_variance_groups(
    scores: Tensor, group_size: int, keep_frac: float, eps: float = MIN_STD
) -> Tensor:
    """Keep mask `bool[B / n]`: the `ceil(keep_frac * G)` groups of largest reward std, of
    those whose std exceeds `eps` (ties: the earlier group). `keep_frac = 1` keeps every
    group, zero-variance ones included (filtering off).

    >>> scores = torch.tensor([0.0, 0.0, 1.0, 0.0, 1.0, 1.0, -1.0, 1.0])  # 4 groups of 2
    >>> top_variance_groups(scores, 2, 0.25).tolist()  # std 0, 0.5, 0, 1: keep 1 group
    [False, False, False, True]
    >>> top_variance_groups(scores, 2, 0.75).tolist()  # 3 places, 2 groups with variance
    [False, True, False, True]
    """
    if not 0.0 < keep_frac <= 1.0:
        raise ValueError(f"keep_frac must be in (0, 1], got {keep_frac}")
    std = group_reward_std(scores, group_size)
    if keep_frac == 1.0:
        return torch.ones_like(std, dtype=torch.bool)
    rank_key = -torch.round(std, decimals=6)
    order = torch.sort(rank_key, stable=True).indices  # largest std first, earlier on ties
    n_keep = math.ceil(keep_frac * std.numel())
    keep = torch.zeros_like(std, dtype=torch.bool)
    keep[order[:n_keep]] = True
    return keep & (std > eps)

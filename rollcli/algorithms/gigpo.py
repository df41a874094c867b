"""Episode- and step-level group advantages for multi-turn agents (StarPO and GiGPO).

StarPO (Wang et al. 2025, RAGEN, arXiv:2504.20073) trains on a whole episode as one
sample: the episode return `R_i` sits on the last model token and, with gamma = 1, every
model token of the episode gets the group-normalised return

    A^E_i = (R_i - mean_{j in g(i)} R_j) / (std_{j in g(i)} R_j + eps)

where `g(i)` are the episodes that share i's env seed. GiGPO (Feng et al. 2025,
Group-in-Group Policy Optimization, arXiv:2505.10978) adds a step-level advantage: the
steps of a group's episodes that acted on an identical state (an "anchor state") form a
step group; each step's discounted return `R_t = sum_k gamma^k r_{t+k}` is normalised
within its step group, and the action's tokens get

    A_t = A^E_i + omega * A^S_t,    A^S_t = (R_t - mean_{anchor} R) / (std_{anchor} R + eps)

A group (or step group) of one has no baseline: its advantage is 0. `std` is the
unbiased (Bessel-corrected) standard deviation, as in `group.grpo_advantages`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch
from torch import Tensor

from rollcli.algorithms.group import centre_groups


def group_normalize(
    values: Sequence[float], group_ids: Sequence[Hashable], norm_std: bool = True, eps: float = 1e-6
) -> list[float]:
    """`(v - mean_group) / (std_group + eps)` for each value (groups of one give 0).

    >>> group_normalize([1.0, 0.0, 5.0, 2.0], ["a", "a", "b", "c"], norm_std=False)
    [0.5, -0.5, 0.0, 0.0]
    """
    members: dict[Hashable, list[int]] = defaultdict(list)
    for i, g in enumerate(group_ids):
        members[g].append(i)
    out = [0.0] * len(values)
    for idx in members.values():
        if len(idx) < 2:
            continue
        v = torch.tensor([float(values[i]) for i in idx], dtype=torch.float64)
        centred = centre_groups(v[None])[0]
        if norm_std:
            centred = centred / (v.std() + eps)
        for i, a in zip(idx, centred.tolist(), strict=True):
            out[i] = a
    return out


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """`R_t = r_t + gamma * R_{t+1}` for each step of one episode.

    >>> discounted_returns([0.0, -0.1, 1.0], 0.5)
    [0.2, 0.4, 1.0]
    """
    out, running = [0.0] * len(rewards), 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = float(rewards[t]) + gamma * running
        out[t] = round(running, 12)
    return out


def gigpo_step_advantages(
    step_rewards: Sequence[Sequence[float]],
    state_keys: Sequence[Sequence[str]],
    groups: Sequence[Hashable],
    gamma: float,
    norm_std: bool = True,
    eps: float = 1e-6,
) -> list[list[float]]:
    """GiGPO's step-level advantage `A^S` of every step of every episode.

    Args:
        step_rewards: per episode, the reward of each step.
        state_keys: per episode, the key of the state each step acted on.
        groups: per episode, its group (episodes of a group share an env seed); only
            steps of the same group can share an anchor state.
        gamma: discount of the step returns.
    """
    flat_returns: list[float] = []
    flat_anchor: list[tuple[Hashable, str]] = []
    shape = []
    for rewards, keys, group in zip(step_rewards, state_keys, groups, strict=True):
        if len(rewards) != len(keys):
            raise ValueError(f"{len(rewards)} step rewards but {len(keys)} state keys")
        flat_returns += discounted_returns(rewards, gamma)
        flat_anchor += [(group, key) for key in keys]
        shape.append(len(rewards))
    flat = group_normalize(flat_returns, flat_anchor, norm_std, eps)
    out, start = [], 0
    for n in shape:
        out.append(flat[start : start + n])
        start += n
    return out


def turn_token_values(
    turn_spans: Sequence[Sequence[tuple[int, int]]], per_turn: Sequence[Sequence[float]], width: int
) -> Tensor:
    """`[B, width]` with each turn's value on its tokens (`response[start:end]`), 0 elsewhere.

    >>> turn_token_values([[(0, 2), (3, 4)]], [[1.0, -2.0]], 5)
    tensor([[ 1.,  1.,  0., -2.,  0.]])
    """
    out = torch.zeros(len(turn_spans), width)
    for row, (spans, values) in enumerate(zip(turn_spans, per_turn, strict=True)):
        for (start, end), value in zip(spans, values, strict=True):
            out[row, start:end] = float(value)
    return out


def group_rloo(values: Sequence[float], group_ids: Sequence[Hashable]) -> list[float]:
    """Leave-one-out baseline within each group: `n/(n-1) * (v - mean_group)` (0 alone).

    >>> group_rloo([1.0, 0.0, 0.0, 7.0], [0, 0, 0, 1])
    [1.0, -0.5, -0.5, 0.0]
    """
    sizes: dict[Hashable, int] = defaultdict(int)
    for g in group_ids:
        sizes[g] += 1
    centred = group_normalize(values, group_ids, norm_std=False)
    return [
        c * sizes[g] / (sizes[g] - 1) if sizes[g] > 1 else 0.0
        for c, g in zip(centred, group_ids, strict=True)
    ]

"""DAPO's sampling and length shaping (Yu et al. 2025, arXiv:2503.14476).

DAPO adds to GRPO: clip-higher (`clip_high > clip_low`, in the PPO loss), token-mean
aggregation, dynamic sampling (drop prompt groups whose samples all score the same,
since their group-normalised advantage is 0 and they carry no gradient), and overlong
reward shaping (soft punishment, or masking truncated samples out of the loss).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rollcli.algorithms.group import group_view


def overlong_buffer_tokens(buffer_frac: float, max_len: int) -> int:
    """`algorithm.overlong_buffer` is a fraction of the max response length; in tokens.

    DAPO's 4096-token buffer on a 20480-token limit is a fraction of 0.2.
    """
    if not 0.0 <= buffer_frac < 1.0:
        raise ValueError(f"overlong_buffer must be in [0, 1), got {buffer_frac}")
    return int(round(buffer_frac * max_len))


def overlong_penalty(
    lengths: Tensor, max_len: int, buffer_len: int, penalty_factor: float = 1.0
) -> Tensor:
    """DAPO soft overlong punishment, to add to the sequence score `[B]`.

        0                                          if L <= max_len - buffer_len
        (max_len - buffer_len - L) / buffer_len * f   if max_len - buffer_len < L <= max_len
        -f                                         if L > max_len

    `buffer_len=0` turns it off (all zeros).
    """
    if buffer_len < 0 or buffer_len > max_len:
        raise ValueError(f"buffer_len must be in [0, max_len={max_len}], got {buffer_len}")
    lengths = lengths.float()
    if buffer_len == 0:
        return torch.zeros_like(lengths)
    expected = max_len - buffer_len
    ramp = (expected - lengths) / buffer_len * penalty_factor
    penalty = torch.where(lengths > expected, ramp, torch.zeros_like(lengths))
    return penalty.clamp(min=-penalty_factor)


def truncation_mask(finished: Tensor) -> Tensor:
    """`[B]` float: 1 for samples that ended on their own, 0 for truncated ones.

    Multiply it into the response mask (`mask * truncation_mask(finished)[:, None]`) to
    drop truncated samples from the loss (DAPO's overlong filtering,
    `algorithm.mask_truncated`). Take lengths for `overlong_penalty` from the mask before:
    the truncated samples keep their scores (and group baseline), only their loss goes.
    """
    return finished.to(torch.bool).float()


@torch.no_grad()
def groups_with_variance(scores: Tensor, group_size: int, eps: float = 1e-6) -> Tensor:
    """Dynamic-sampling keep mask `bool[B / n]`: groups whose scores are not all equal.

    A group is kept when `max(R) - min(R) > eps`. Expand to rows with
    `keep.repeat_interleave(group_size)`.
    """
    groups = group_view(scores.float(), group_size)
    return (groups.amax(dim=-1) - groups.amin(dim=-1)) > eps

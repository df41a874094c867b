"""Statistics over the real tokens of a padded `[B, T]` batch.

`mask` is 1 for a real response token and 0 for padding (bool or float). Every
function here ignores the values at masked positions, whatever they are (NaN excepted).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _as_float(mask: Tensor, like: Tensor) -> Tensor:
    return mask.to(dtype=like.dtype if like.is_floating_point() else torch.float32)


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """`sum(x * mask)` over `dim` (all elements when `dim` is None)."""
    m = _as_float(mask, x)
    masked = torch.where(m != 0, x * m, torch.zeros_like(x * m))
    return masked.sum() if dim is None else masked.sum(dim=dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """`sum(x * mask) / sum(mask)` over `dim`; 0 where the mask is empty.

    >>> masked_mean(torch.tensor([[1.0, 3.0, 99.0]]), torch.tensor([[1, 1, 0]]))
    tensor(2.)
    """
    m = _as_float(mask, x)
    total = masked_sum(x, m, dim)
    count = m.sum() if dim is None else m.sum(dim=dim)
    return torch.where(count > 0, total / count.clamp_min(torch.finfo(total.dtype).tiny), 0.0)


def masked_var(x: Tensor, mask: Tensor, unbiased: bool = True) -> Tensor:
    """Variance of the real tokens (a scalar).

    `var = sum(mask * (x - mean)^2) / (N - 1)` with `N = sum(mask)` when `unbiased`
    (Bessel's correction), `/ N` otherwise. With fewer than two tokens the unbiased
    variance is undefined and the biased one (0 for one token) is returned.
    """
    m = _as_float(mask, x)
    mean = masked_mean(x, m)
    centered_sq = (x - mean) ** 2
    var = masked_mean(centered_sq, m)
    if not unbiased:
        return var
    count = m.sum()
    bessel = torch.where(count > 1, count / (count - 1).clamp_min(1.0), torch.ones_like(count))
    return var * bessel


def masked_whiten(x: Tensor, mask: Tensor, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Normalise the real tokens to unit variance (and zero mean when `shift_mean`).

    `y = (x - mean) / sqrt(var + eps)`; with `shift_mean=False` the mean is added back,
    `y = (x - mean) / sqrt(var + eps) + mean`. Statistics come from real tokens only
    (unbiased variance) and masked positions of the result are set to 0.
    """
    m = _as_float(mask, x)
    mean = masked_mean(x, m)
    var = masked_var(x, m, unbiased=True)
    y = (x - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        y = y + mean
    return torch.where(m != 0, y, torch.zeros_like(y))

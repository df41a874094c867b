"""Masked statistics against hand-computed numbers."""

import math

import pytest
import torch

from rollcli.algorithms.masked import masked_mean, masked_sum, masked_var, masked_whiten

X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0]])  # real values: 1, 2, 4


def test_sum_and_mean_ignore_masked_values():
    assert masked_sum(X, MASK).item() == pytest.approx(7.0)  # 1 + 2 + 4
    assert masked_mean(X, MASK).item() == pytest.approx(7 / 3)
    torch.testing.assert_close(masked_mean(X, MASK, dim=-1), torch.tensor([1.5, 4.0]))
    torch.testing.assert_close(masked_sum(X, MASK, dim=-1), torch.tensor([3.0, 4.0]))


def test_nan_under_the_mask_is_ignored():
    x = torch.tensor([[1.0, float("nan")]])
    assert masked_mean(x, torch.tensor([[1, 0]])).item() == pytest.approx(1.0)


def test_empty_mask_gives_zero_not_nan():
    assert masked_mean(X, torch.zeros_like(MASK)).item() == 0.0
    torch.testing.assert_close(
        masked_mean(X, torch.tensor([[1, 0, 0], [0, 0, 0]]), dim=-1), torch.tensor([1.0, 0.0])
    )


def test_variance_unbiased_and_biased():
    # mean 7/3; deviations -4/3, -1/3, 5/3; squares sum to 42/9 = 14/3
    assert masked_var(X, MASK, unbiased=True).item() == pytest.approx(14 / 3 / 2)  # 7/3
    assert masked_var(X, MASK, unbiased=False).item() == pytest.approx(14 / 9)


def test_whiten_uses_real_tokens_and_zeroes_padding():
    out = masked_whiten(X, MASK)
    std = math.sqrt(7 / 3)
    expected = torch.tensor(
        [[(1 - 7 / 3) / std, (2 - 7 / 3) / std, 0.0], [(4 - 7 / 3) / std, 0, 0]]
    )
    torch.testing.assert_close(out, expected)
    kept_mean = masked_whiten(X, MASK, shift_mean=False)
    torch.testing.assert_close(kept_mean[0, 0], torch.tensor((1 - 7 / 3) / std + 7 / 3))


def test_whiten_matches_plain_python_on_random_input():
    torch.manual_seed(0)
    x = torch.randn(4, 7)
    mask = (torch.rand(4, 7) > 0.3).float()
    vals = [x[i, t].item() for i in range(4) for t in range(7) if mask[i, t]]
    mean = sum(vals) / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
    out = masked_whiten(x, mask, eps=0.0)
    for i in range(4):
        for t in range(7):
            want = (x[i, t].item() - mean) / math.sqrt(var) if mask[i, t] else 0.0
            assert out[i, t].item() == pytest.approx(want, abs=1e-5)

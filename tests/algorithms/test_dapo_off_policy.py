"""DAPO shaping, dynamic-sampling mask and truncated IS weights."""

import math

import pytest
import torch

from rollcli.algorithms.dapo import (
    groups_with_variance,
    overlong_buffer_tokens,
    overlong_penalty,
    truncation_mask,
)
from rollcli.algorithms.off_policy import truncated_is_weights


def test_overlong_penalty_by_hand():
    # max_len 10, buffer 4 -> free up to 6, then (6 - L) / 4, -1 from 10 on
    lengths = torch.tensor([5, 6, 7, 10, 12])
    got = overlong_penalty(lengths, max_len=10, buffer_len=4, penalty_factor=1.0)
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, -0.25, -1.0, -1.0]))
    got = overlong_penalty(lengths, max_len=10, buffer_len=4, penalty_factor=2.0)
    torch.testing.assert_close(got, torch.tensor([0.0, 0.0, -0.5, -2.0, -2.0]))
    torch.testing.assert_close(overlong_penalty(lengths, 10, 0, 1.0), torch.zeros(5))
    with pytest.raises(ValueError):
        overlong_penalty(lengths, 10, 11, 1.0)


def test_overlong_buffer_fraction_in_tokens():
    assert overlong_buffer_tokens(0.2, 20480) == 4096  # DAPO's setting
    assert overlong_buffer_tokens(0.0, 256) == 0
    with pytest.raises(ValueError):
        overlong_buffer_tokens(1.5, 256)


def test_truncation_mask():
    got = truncation_mask(torch.tensor([True, False, True]))
    torch.testing.assert_close(got, torch.tensor([1.0, 0.0, 1.0]))


def test_groups_with_variance():
    scores = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    torch.testing.assert_close(groups_with_variance(scores, 4), torch.tensor([True, False, False]))


def test_truncated_is_weights_by_hand():
    old = torch.zeros(1, 4)
    behaviour = torch.tensor([[0.0, math.log(4), -0.5, -1.0]])
    mask = torch.tensor([[1, 1, 0, 1]])
    # exp(old - behaviour) = [1, 0.25, e^0.5 (masked -> 0), e = 2.718 -> capped at 2]
    got = truncated_is_weights(old, behaviour, mask, cap=2.0)
    torch.testing.assert_close(got, torch.tensor([[1.0, 0.25, 0.0, 2.0]]))
    assert not truncated_is_weights(old.requires_grad_(True), behaviour, mask).requires_grad

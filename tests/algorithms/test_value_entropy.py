"""Value loss, entropy and log-probs against hand-computed numbers."""

import math

import pytest
import torch

from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits
from rollcli.algorithms.value_loss import value_loss


def test_value_loss_by_hand():
    values = torch.tensor([[1.0, 2.0]], requires_grad=True)
    old, returns = torch.tensor([[0.5, 2.0]]), torch.tensor([[2.0, 1.0]])
    # tok0: (1 - 2)^2 = 1; clipped value 0.5 + clamp(0.5, +-0.2) = 0.7 -> (0.7 - 2)^2 = 1.69
    #       max 1.69 -> 0.845 (clipped)
    # tok1: (2 - 1)^2 = 1 both ways -> 0.5
    loss, metrics = value_loss(values, old, returns, torch.ones(1, 2), clip=0.2)
    assert loss.item() == pytest.approx((0.845 + 0.5) / 2)
    assert metrics["vf_loss"] == pytest.approx(0.6725)
    assert metrics["vf_clipfrac"] == pytest.approx(0.5)
    loss.backward()
    # tok0's clipped branch is saturated (no gradient); tok1: 0.5 * 2 * (2 - 1) / 2 tokens
    torch.testing.assert_close(values.grad, torch.tensor([[0.0, 0.5]]))
    loss, metrics = value_loss(values, old, returns, torch.ones(1, 2))
    assert loss.item() == pytest.approx(0.5)  # 0.5 * (1 + 1) / 2
    assert metrics["vf_clipfrac"] == 0.0


def test_entropy_by_hand():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, math.log(3), -math.inf, -math.inf]]])
    # uniform over 4: ln 4;  p = [0.25, 0.75]: -(0.25 ln 0.25 + 0.75 ln 0.75)
    h2 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    got = entropy_from_logits(logits.nan_to_num(neginf=-1e9))
    torch.testing.assert_close(got, torch.tensor([[math.log(4), h2]]))


def test_entropy_is_stable_for_large_logits():
    got = entropy_from_logits(torch.tensor([[[1000.0, 1000.0]]]))
    assert got.item() == pytest.approx(math.log(2))


def test_entropy_and_logprobs_match_torch_reference_with_chunking():
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11) * 3
    labels = torch.randint(0, 11, (3, 5))
    want_h = torch.distributions.Categorical(logits=logits).entropy()
    want_lp = torch.log_softmax(logits, -1).gather(-1, labels[..., None]).squeeze(-1)
    torch.testing.assert_close(entropy_from_logits(logits, chunk_size=4), want_h)
    torch.testing.assert_close(logprobs_from_logits(logits, labels, chunk_size=4), want_lp)


def test_logprobs_by_hand_and_gradient():
    logits = torch.tensor([[[0.0, math.log(3)]]], requires_grad=True)
    lp = logprobs_from_logits(logits, torch.tensor([[1]]))
    assert lp.item() == pytest.approx(math.log(0.75))
    lp.sum().backward()
    # d log p_y / d z = onehot(y) - p = [0 - 0.25, 1 - 0.75]
    torch.testing.assert_close(logits.grad, torch.tensor([[[-0.25, 0.25]]]))


def test_bf16_logits_are_reduced_in_float32():
    logits = torch.randn(2, 3, 7).to(torch.bfloat16)
    assert entropy_from_logits(logits).dtype == torch.float32
    assert logprobs_from_logits(logits, torch.zeros(2, 3, dtype=torch.long)).dtype == torch.float32

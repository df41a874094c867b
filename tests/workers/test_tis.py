"""Truncated importance sampling in the actor's update: weights `min(pi_old / mu, cap)`
against the sampler's log-probs, and what they do to the loss."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.data.batch import Batch
from rollcli.workers.actor_train import _tis_weights


def _micro(behaviour: list[list[float]]) -> Batch:
    return Batch({"behaviour_logprobs": torch.tensor(behaviour)}, {})


def test_weights_and_metrics_by_hand() -> None:
    old = torch.log(torch.tensor([[0.5, 0.25, 0.1]]))
    behaviour = torch.log(torch.tensor([[0.25, 0.5, 0.1]])).tolist()
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    weights, metrics = _tis_weights(1.5, old, _micro(behaviour), mask)
    # ratios 2 and 0.5; 2 is capped at 1.5; padding weighs 0
    assert weights.tolist()[0] == pytest.approx([1.5, 0.5, 0.0])
    assert metrics["tis_ratio_mean"] == pytest.approx((2 + 0.5) / 2)
    assert metrics["tis_clipped_frac"] == pytest.approx(0.5)


def test_off_without_a_cap_or_without_the_samplers_logprobs() -> None:
    old, mask = torch.zeros(1, 2), torch.ones(1, 2)
    assert _tis_weights(None, old, _micro([[0.0, 0.0]]), mask) is None
    assert _tis_weights(2.0, old, Batch({}, {}), mask) is None


def test_the_weights_scale_each_tokens_policy_gradient_loss() -> None:
    logprobs = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    adv, mask = torch.tensor([[1.0, 1.0]]), torch.ones(1, 2)
    w = torch.tensor([[1.5, 0.5]])
    kwargs = dict(logprobs=logprobs, old_logprobs=logprobs.detach(), advantages=adv, mask=mask)
    plain, _ = compute_policy_loss("ppo", **kwargs)
    weighted, _ = compute_policy_loss("ppo", **kwargs, is_weights=w)
    # on-policy ratio 1: per-token loss is -A = -1, token-mean: plain -1, weighted -(1.5+0.5)/2
    assert float(plain.detach()) == pytest.approx(-1.0)
    assert float(weighted.detach()) == pytest.approx(-1.0)
    grad_w = torch.autograd.grad(weighted, logprobs)[0]
    assert grad_w.tolist()[0] == pytest.approx([-1.5 / 2, -0.5 / 2])
    assert math.isclose(float(grad_w.sum()), -1.0)

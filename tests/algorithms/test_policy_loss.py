"""Policy losses against hand-computed values and gradients, each called with one
`PolicyLossInputs`."""

import dataclasses
import doctest
import math
import typing

import pytest
import torch

from rollcli.algorithms import loss_inputs
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.policy_loss import (
    POLICY_LOSSES,
    compute_policy_loss,
    gspo_loss,
    pg_loss,
    ppo_clip_loss,
    raftpp_loss,
    topr_loss,
)
from rollcli.config.algorithm import PolicyLossName
from rollcli.config.loss_spec import losses_where

# ratios r = [1.5, 0.5, 1.1] (old logp = 0), advantages [1, -1, 2], clip 0.2
RATIOS = torch.tensor([[1.5, 0.5, 1.1]])
ADV = torch.tensor([[1.0, -1.0, 2.0]])
MASK = torch.ones(1, 3)


def _logp(ratios):
    return ratios.log().clone().requires_grad_(True)


def _x(logprobs, old, advantages, mask, **knobs) -> PolicyLossInputs:
    return PolicyLossInputs(logprobs, advantages, mask, old_logprobs=old, **knobs)


def test_table_matches_config_choices():
    assert set(POLICY_LOSSES) == set(typing.get_args(PolicyLossName))


def test_ppo_clip_by_hand():
    # tok0: max(-1.5, -1.2) = -1.2 (clipped)   tok1: max(0.5, 0.8) = 0.8 (clipped)
    # tok2: max(-2.2, -2.2) = -2.2              token-mean = -2.6 / 3
    logp = _logp(RATIOS)
    loss, metrics = ppo_clip_loss(_x(logp, torch.zeros(1, 3), ADV, MASK))
    assert loss.item() == pytest.approx(-2.6 / 3)
    assert metrics["pg_loss"] == pytest.approx(-2.6 / 3)
    assert metrics["clipfrac"] == pytest.approx(2 / 3)
    assert metrics["ratio_mean"] == pytest.approx(3.1 / 3)
    # k3 of each ratio: (r - 1) - log r
    k3 = [(r - 1) - math.log(r) for r in (1.5, 0.5, 1.1)]
    assert metrics["approx_kl"] == pytest.approx(sum(k3) / 3, rel=1e-5)
    loss.backward()
    # only tok2 is unclipped: d(-A r)/dlogp = -A r = -2.2, / 3 tokens
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, 0.0, -2.2 / 3]]))


def test_ppo_clip_higher_and_aggregation():
    # clip_high 0.6: tok0 is no longer clipped -> -1.5
    loss, _ = ppo_clip_loss(_x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK, clip_high=0.6))
    assert loss.item() == pytest.approx((-1.5 + 0.8 - 2.2) / 3)
    x = _x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK, agg="seq-mean-token-sum")
    loss, _ = ppo_clip_loss(x)
    assert loss.item() == pytest.approx(-2.6)


def test_ppo_dual_clip_by_hand():
    # r = 4, A = -1: max(4, 1.2) = 4; dual clip 3 bounds it: min(4, 3) = 3
    logp, old = _logp(torch.tensor([[4.0]])), torch.zeros(1, 1)
    adv, mask = torch.tensor([[-1.0]]), torch.ones(1, 1)
    loss, _ = ppo_clip_loss(_x(logp, old, adv, mask))
    assert loss.item() == pytest.approx(4.0)
    loss, metrics = ppo_clip_loss(_x(logp, old, adv, mask, dual_clip=3))
    assert loss.item() == pytest.approx(3.0)
    assert metrics["dual_clipfrac"] == 1.0
    with pytest.raises(ValueError, match="dual_clip must be > 1, got 1.0"):
        _x(logp, old, adv, mask, dual_clip=1.0)


def test_is_weights_multiply_the_token_loss():
    # (-1.2 * 2 + 0.8 * 1 - 2.2 * 0.5) / 3 = -2.7 / 3
    w = torch.tensor([[2.0, 1.0, 0.5]])
    loss, _ = ppo_clip_loss(_x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK, is_weights=w))
    assert loss.item() == pytest.approx(-0.9)


def test_raftpp_keeps_positive_tokens_only():
    # tokens 0 and 2 have A > 0: (-1.2 - 2.2) / 2
    loss, metrics = raftpp_loss(_x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK))
    assert loss.item() == pytest.approx(-1.7)
    assert metrics["keep_frac"] == pytest.approx(2 / 3)


def test_gspo_by_hand():
    # row 0: log ratios [0.2, -0.1, (pad 0.5)] -> mean 0.05, s = e^0.05 = 1.051271, A = 1
    #        unclipped -1.051271 > clipped? clip(1.0513) = 1.0513 -> loss -1.051271 per token
    # row 1: log ratios 0.4 each -> s = e^0.4 = 1.491825, A = 1 -> clipped to -1.2
    # seq-mean-token-mean: (-1.051271 - 1.2) / 2
    old = torch.zeros(2, 3)
    logp = torch.tensor([[0.2, -0.1, 0.5], [0.4, 0.4, 0.4]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    agg = "seq-mean-token-mean"
    loss, metrics = gspo_loss(_x(logp, old, torch.ones(2, 3), mask, agg=agg))
    s0 = math.exp(0.05)
    assert loss.item() == pytest.approx((-s0 - 1.2) / 2, rel=1e-5)
    assert metrics["clipfrac"] == pytest.approx(3 / 5)  # row 1's three tokens
    assert metrics["seq_ratio_mean"] == pytest.approx((s0 + math.exp(0.4)) / 2, rel=1e-5)
    loss.backward()
    # row 0: d(-A s)/dlogp_t = -s0 per token, weight 1/2 (rows) * 1/2 (tokens); row 1 clipped
    want = torch.tensor([[-s0 / 4, -s0 / 4, 0.0], [0.0, 0.0, 0.0]])
    torch.testing.assert_close(logp.grad, want)


def test_topr_by_hand():
    # logp [-1, -2, -0.5], old [-1.2, -1.5, -0.5] -> r = [e^0.2, e^-0.5, 1]; A = [1, -1, -2]
    # tok0 A>=0: -A logp = 1.0
    # tok1 A<0:  -min(e^-0.5, 1) * A * logp = -0.60653 * (-1) * (-2) = -1.21306
    # tok2 A<0:  -1 * (-2) * (-0.5) = -1.0
    logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    old = torch.tensor([[-1.2, -1.5, -0.5]])
    adv = torch.tensor([[1.0, -1.0, -2.0]])
    loss, metrics = topr_loss(_x(logp, old, adv, MASK))
    w = math.exp(-0.5)
    assert loss.item() == pytest.approx((1.0 - 2 * w - 1.0) / 3, rel=1e-5)
    assert metrics["clipfrac"] == 0.0
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1 / 3, w / 3, 2 / 3]]))


def test_topr_truncates_negative_ratio_above_one():
    # r = e > 1 with A = -1: weight min(e, 1) = 1, so the gradient is -A = +1
    logp = torch.tensor([[-1.0]], requires_grad=True)
    loss, metrics = topr_loss(
        _x(logp, torch.tensor([[-2.0]]), torch.tensor([[-1.0]]), torch.ones(1, 1))
    )
    loss.backward()
    assert logp.grad.item() == pytest.approx(1.0)
    assert metrics["clipfrac"] == 1.0


def test_pg_loss_by_hand():
    # -A logp: -2 * -1 = 2, -1 * -2 = 2 -> mean 2; grad -A / 2 = [-1, -0.5]
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, metrics = pg_loss(PolicyLossInputs(logp, torch.tensor([[2.0, 1.0]]), torch.ones(1, 2)))
    assert loss.item() == pytest.approx(2.0)
    assert metrics["clipfrac"] == 0.0 and metrics["ratio_mean"] == pytest.approx(1.0)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[-1.0, -0.5]]))


def test_compute_policy_loss_uniform_call():
    x = _x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK, clip_low=0.2, clip_high=0.2)
    for name in POLICY_LOSSES:
        loss, metrics = compute_policy_loss(name, x)
        assert torch.isfinite(loss)
        assert {"pg_loss", "clipfrac", "ratio_mean", "approx_kl"} <= set(metrics)
    loss, _ = compute_policy_loss("ppo", x)
    assert loss.item() == pytest.approx(-2.6 / 3)
    dual = dataclasses.replace(x, dual_clip=3.0)
    for name in ("pg", "topr", "gspo"):
        with pytest.raises(
            ValueError, match=f"dual_clip applies to the ppo and raftpp losses, not '{name}'"
        ):
            compute_policy_loss(name, dual)
    for name in losses_where(dual_clip=True):
        compute_policy_loss(name, dual)
    with pytest.raises(TypeError):
        PolicyLossInputs(x.logprobs, ADV, MASK, clip_ratio=0.2)
    with pytest.raises(ValueError, match="ppo"):
        compute_policy_loss("ppo2", x)


def test_the_inputs_are_one_shape_and_frozen():
    with pytest.raises(
        ValueError,
        match=r"PolicyLossInputs.is_weights is \[1, 2\], not logprobs' \[B, T\] = \[1, 3\]",
    ):
        _x(_logp(RATIOS), torch.zeros(1, 3), ADV, MASK, is_weights=torch.ones(1, 2))
    with pytest.raises(ValueError, match="PolicyLossInputs.advantages"):
        _x(_logp(RATIOS), torch.zeros(1, 3), ADV[:, :2], MASK)
    x = _x(_logp(RATIOS), None, ADV, MASK)
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.clip_low = 0.3  # type: ignore[misc]
    assert doctest.testmod(loss_inputs).failed == 0


def test_on_policy_the_anchor_is_the_policy_and_topr_falls_back_to_it():
    # no old_logprobs: ratio 1 everywhere, so ppo is -mean(A) and pg's metrics are 1 and 0
    logp = _logp(RATIOS)
    loss, metrics = ppo_clip_loss(_x(logp, None, ADV, MASK))
    assert loss.item() == pytest.approx(-(1.0 - 1.0 + 2.0) / 3)
    assert metrics["ratio_mean"] == 1.0 and metrics["approx_kl"] == 0.0
    # topr without mu reads pi_old; with mu it reads mu (r = e^-1 < 1 on the negative token)
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    adv, old, mu = (
        torch.tensor([[1.0, -1.0]]),
        torch.tensor([[-1.0, -2.0]]),
        torch.tensor([[-1.0, -1.0]]),
    )
    loss, _ = topr_loss(_x(logp, old, adv, torch.ones(1, 2)))
    assert loss.item() == pytest.approx((1.0 - 2.0) / 2)
    loss, metrics = topr_loss(_x(logp, old, adv, torch.ones(1, 2), behaviour_logprobs=mu))
    assert loss.item() == pytest.approx((1.0 - 2.0 * math.exp(-1.0)) / 2)
    assert metrics["ratio_mean"] == pytest.approx((1.0 + math.exp(-1.0)) / 2)


def test_gspo_clamps_the_sequence_log_ratio():
    # every token's log-ratio is 12 (under the per-token clamp at 20), so the sequence
    # log-ratio is 12 > 10: clamped at 10, s = e^10, A = -1. unclipped = -A e^10 = e^10 >
    # clipped = -A * 1.2, so the loss is e^10 with no gradient (clipped PPO's zero
    # gradient); unclamped it was e^12 with a gradient of e^12 / 3 ~ 5e4 per token.
    old = torch.zeros(1, 3)
    logp = torch.full((1, 3), 12.0, requires_grad=True)
    adv = -torch.ones(1, 3)
    loss, _ = gspo_loss(_x(logp, old, adv, torch.ones(1, 3)))
    assert loss.item() == pytest.approx(math.exp(10.0), rel=1e-5)
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.zeros(1, 3))
    # below the limit the gradient flows as before: log-ratio 9.9 -> d/dlogp_t = e^9.9 / 3
    logp = torch.full((1, 3), 9.9, requires_grad=True)
    gspo_loss(_x(logp, old, adv, torch.ones(1, 3)))[0].backward()
    torch.testing.assert_close(logp.grad, torch.full((1, 3), math.exp(9.9) / 3))

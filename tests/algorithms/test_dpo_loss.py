"""Preference losses against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from rollcli.algorithms.dpo_loss import DPO_LOSSES, dpo_loss, sequence_logprob
from rollcli.config.offline_sections import DPOConfig

# pair 1: h = (-1 - -1.5) - (-2 - -1.5) = 0.5 + 0.5 = 1
# pair 2: h = (-3 - -2) - (-1 - -2) = -1 - 1 = -2
PI_C, PI_R = torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -1.0])
REF_C, REF_R = torch.tensor([-1.5, -2.0]), torch.tensor([-1.5, -2.0])


def test_the_losses_are_the_config_choices():
    assert set(DPO_LOSSES) == set(DPOConfig.model_fields["loss"].annotation.__args__)


def test_sigmoid_dpo_by_hand():
    # -log sigmoid(0.5 * 1) = log(1 + e^-0.5) = 0.474077; -log sigmoid(0.5 * -2) = 1.313262
    loss, m = dpo_loss(PI_C, PI_R, REF_C, REF_R, beta=0.5)
    assert loss.item() == pytest.approx((0.474077 + 1.313262) / 2, abs=1e-6)
    # implicit rewards beta (pi - ref): chosen [0.25, -0.5], rejected [-0.25, 0.5]
    assert m["rewards/chosen"] == pytest.approx(-0.125)
    assert m["rewards/rejected"] == pytest.approx(0.125)
    assert m["rewards/margin"] == pytest.approx(-0.25)  # (0.5 + -1) / 2
    assert m["rewards/accuracy"] == 0.5
    assert m["loss"] == pytest.approx(loss.item())


def test_sigmoid_gradient_is_minus_beta_sigmoid_of_minus_beta_h():
    pi_c = torch.tensor([-1.0], requires_grad=True)
    loss, _ = dpo_loss(pi_c, PI_R[:1], REF_C[:1], REF_R[:1], beta=0.5)
    loss.backward()
    # d/dpi_c -log sigmoid(beta h) = -beta sigmoid(-beta h) = -0.5 * 0.377541
    assert pi_c.grad.item() == pytest.approx(-0.188771, abs=1e-6)


def test_conservative_dpo_mixes_in_the_flipped_label():
    # 0.9 * 0.474077 + 0.1 * -log sigmoid(-0.5) = 0.9 * 0.474077 + 0.1 * 0.974077 = 0.524077
    loss, _ = dpo_loss(
        PI_C[:1], PI_R[:1], REF_C[:1], REF_R[:1], beta=0.5, loss_type="cdpo", label_smoothing=0.1
    )
    assert loss.item() == pytest.approx(0.524077, abs=1e-6)
    plain, _ = dpo_loss(PI_C[:1], PI_R[:1], REF_C[:1], REF_R[:1], beta=0.5, label_smoothing=0.1)
    assert plain.item() == pytest.approx(0.474077, abs=1e-6)  # sigmoid ignores it


def test_ipo_regresses_h_to_one_over_two_beta():
    # (h - 1 / (2 * 0.25))^2: pair 1 (1 - 2)^2 = 1, pair 2 (-2 - 2)^2 = 16
    loss, _ = dpo_loss(PI_C, PI_R, REF_C, REF_R, beta=0.25, loss_type="ipo")
    assert loss.item() == pytest.approx(8.5)
    at_target, _ = dpo_loss(PI_C[:1], PI_R[:1], REF_C[:1], REF_R[:1], beta=0.5, loss_type="ipo")
    assert at_target.item() == pytest.approx(0.0)


def test_equal_policy_and_reference_give_log_2_and_no_accuracy():
    loss, m = dpo_loss(PI_C, PI_R, PI_C, PI_R, beta=0.1)
    assert loss.item() == pytest.approx(0.693147, abs=1e-6)
    assert m["rewards/accuracy"] == 0.0 and m["rewards/margin"] == 0.0


def test_sequence_logprob_sums_or_averages_real_tokens():
    logprobs = torch.tensor([[-1.0, -2.0, -9.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert sequence_logprob(logprobs, mask).tolist() == [-3.0, -4.0]
    assert sequence_logprob(logprobs, mask, average=True).tolist() == [-1.5, -4.0]


def test_unknown_loss_raises():
    with pytest.raises(ValueError, match="sigmoid"):
        dpo_loss(PI_C, PI_R, REF_C, REF_R, loss_type="hinge")

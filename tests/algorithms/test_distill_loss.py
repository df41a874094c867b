"""Distillation divergences against hand-computed values on a two-token vocabulary.

teacher logits [0, 0] -> p = [0.5, 0.5]; student logits [ln 3, 0] -> q = [0.75, 0.25].
"""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.distill_loss import (
    DISTILL_LOSSES,
    distill_loss,
    student_on_support,
    token_divergence,
)
from rollcli.config.offline_sections import DistillConfig

TEACHER = torch.tensor([[0.0, 0.0]])
STUDENT = torch.tensor([[math.log(3.0), 0.0]])


def test_the_losses_are_the_config_choices():
    assert set(DISTILL_LOSSES) == set(DistillConfig.model_fields["loss"].annotation.__args__)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        # 0.5 ln(0.5/0.75) + 0.5 ln(0.5/0.25)
        ("forward_kl", 0.143841),
        # 0.75 ln(0.75/0.5) + 0.25 ln(0.25/0.5)
        ("reverse_kl", 0.130812),
        # m = [0.625, 0.375]: 0.5 KL(p||m) + 0.5 KL(q||m) = 0.5 (0.032269 + 0.035375)
        ("js", 0.033822),
        # m = 0.1 p + 0.9 q = [0.725, 0.275]: 0.5 ln(0.5/0.725) + 0.5 ln(0.5/0.275)
        ("skew_forward_kl", 0.113137),
        # m = 0.1 q + 0.9 p = [0.525, 0.475]: 0.75 ln(0.75/0.525) + 0.25 ln(0.25/0.475)
        ("skew_reverse_kl", 0.107043),
    ],
)
def test_divergences_by_hand(kind, expected):
    got = token_divergence(STUDENT, TEACHER, kind, skew_alpha=0.1)
    assert got.item() == pytest.approx(expected, abs=1e-6)


def test_all_divergences_vanish_when_student_equals_teacher():
    logits = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    for kind in DISTILL_LOSSES:
        assert token_divergence(logits, logits, kind).abs().max().item() < 1e-6


def test_temperature_softens_both_and_scales_by_t_squared():
    # T = 2: q = softmax([ln3 / 2, 0]) = [0.633975, 0.366025];
    # KL(p||q) = 0.5 ln(0.5/0.633975) + 0.5 ln(0.5/0.366025) = 0.037252; loss = 4 * 0.037252
    loss, metrics = distill_loss(STUDENT, TEACHER, temperature=2.0)
    assert loss.item() == pytest.approx(0.149009, abs=1e-6)
    assert metrics["distill_loss"] == pytest.approx(loss.item())


def test_top_k_support_renormalises_both_distributions():
    teacher_full = torch.tensor([[2.0, 1.0, 0.0, -5.0]])
    student_full = torch.tensor([[0.0, 0.0, 3.0, 3.0]])
    values, ids = teacher_full.topk(2, dim=-1)  # ids [0, 1]
    student = student_on_support(student_full, ids)
    assert student.tolist() == [[0.0, 0.0]]
    # p = softmax([2, 1]) = [0.731059, 0.268941], q = [0.5, 0.5]:
    # 0.731059 ln(0.731059/0.5) + 0.268941 ln(0.268941/0.5) = 0.277721 - 0.166777
    got = token_divergence(student, values, "forward_kl")
    assert got.item() == pytest.approx(0.110944, abs=1e-6)


def test_mask_keeps_only_real_positions_and_the_gradient_flows():
    student = torch.cat([STUDENT, torch.zeros(1, 2)]).requires_grad_(True)
    teacher = torch.cat([TEACHER, torch.tensor([[9.0, -9.0]])])
    loss, _ = distill_loss(student, teacher, torch.tensor([1.0, 0.0]))
    assert loss.item() == pytest.approx(0.143841, abs=1e-6)
    loss.backward()
    # d KL(p||q) / d z_student = q - p = [0.25, -0.25] on the kept row, 0 on the masked one
    torch.testing.assert_close(student.grad, torch.tensor([[0.25, -0.25], [0.0, 0.0]]))


def test_unknown_kind_and_shape_mismatch_raise():
    with pytest.raises(ValueError, match="forward_kl"):
        token_divergence(STUDENT, TEACHER, "kl")
    with pytest.raises(ValueError, match="differ in shape"):
        token_divergence(STUDENT, torch.zeros(1, 3))


def _reverse_kl_by_hand(student: list[float], teacher: list[float]) -> float:
    """`sum_v q(v) (log q(v) - log p(v))` with plain floats."""
    zq, zp = sum(math.exp(z) for z in student), sum(math.exp(z) for z in teacher)
    q = [math.exp(z) / zq for z in student]
    p = [math.exp(z) / zp for z in teacher]
    return sum(qv * (math.log(qv) - math.log(pv)) for qv, pv in zip(q, p, strict=True))


def test_on_policy_reverse_kl_loss_and_gradient_by_hand():
    """On-policy distillation's loss (`distill.mode=on_policy`): the reverse KL at each
    response position, masked to the response, mean over its tokens. Two rows, a 3-token
    vocabulary: row 0 is prompt, response, response; row 1 is prompt, response, padding."""
    student = torch.tensor(
        [
            [[5.0, -5.0, 0.0], [math.log(3.0), 0.0, -30.0], [1.0, 2.0, 3.0]],
            [[0.0, 9.0, 0.0], [0.5, -0.5, 0.0], [7.0, 7.0, -7.0]],
        ]
    )
    teacher = torch.tensor(
        [
            [[0.0, 0.0, 0.0], [0.0, 0.0, -30.0], [3.0, 2.0, 1.0]],
            [[9.0, 0.0, 0.0], [0.0, 0.0, 1.0], [-7.0, 7.0, 7.0]],
        ]
    )
    mask = torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    # position (0, 1) is the module's pair with a third token of ~zero mass on both sides:
    # q = [0.75, 0.25, ~0], p = [0.5, 0.5, ~0], KL(q || p) = 0.130812
    assert _reverse_kl_by_hand(student[0, 1].tolist(), teacher[0, 1].tolist()) == pytest.approx(
        0.130812, abs=1e-6
    )
    kept = [(0, 1), (0, 2), (1, 1)]
    expected = sum(_reverse_kl_by_hand(student[i].tolist(), teacher[i].tolist()) for i in kept)
    expected /= len(kept)  # prompt (column 0) and padding (1, 2) left out

    z = student.clone().requires_grad_(True)
    loss, metrics = distill_loss(z, teacher, mask, kind="reverse_kl")
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert metrics["distill_loss"] == pytest.approx(expected, rel=1e-6)

    # d KL(q || p) / d z_j = q_j (log q_j - log p_j - KL(q || p)), over the mean's N tokens
    loss.backward()
    grad = torch.zeros_like(student)
    for i in kept:
        log_q = torch.log_softmax(student[i].double(), -1)
        log_p = torch.log_softmax(teacher[i].double(), -1)
        kl = _reverse_kl_by_hand(student[i].tolist(), teacher[i].tolist())
        grad[i] = (log_q.exp() * (log_q - log_p - kl) / len(kept)).float()
    torch.testing.assert_close(z.grad, grad, rtol=1e-5, atol=1e-7)
    assert z.grad[:, 0].abs().max() == 0 and z.grad[1, 2].abs().max() == 0

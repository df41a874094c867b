"""KL estimators against hand values and a Monte-Carlo check; the controllers."""

import math
import typing

import pytest
import torch

from rollcli.algorithms.kl import (
    KL_ESTIMATORS,
    AdaptiveKLController,
    FixedKLController,
    kl_estimate,
    kl_loss,
)
from rollcli.config.algorithm import KLEstimator

LN2 = math.log(2)
# token 0: p = 0.5, p_ref = 0.25 -> log r = -ln 2; token 1: p = 0.25, p_ref = 0.5 -> +ln 2
LOGP = torch.tensor([[math.log(0.5), math.log(0.25)]])
REF = torch.tensor([[math.log(0.25), math.log(0.5)]])


def test_table_matches_config_choices():
    assert set(KL_ESTIMATORS) == set(typing.get_args(KLEstimator))


@pytest.mark.parametrize(
    ("estimator", "expected"),
    [
        ("k1", [LN2, -LN2]),  # -log r
        ("k2", [0.5 * LN2**2, 0.5 * LN2**2]),  # (log r)^2 / 2
        ("k3", [(0.5 - 1) + LN2, (2 - 1) - LN2]),  # (r - 1) - log r
        ("abs", [LN2, LN2]),
    ],
)
def test_estimators_by_hand(estimator, expected):
    got = kl_estimate(LOGP, REF, estimator)
    torch.testing.assert_close(got, torch.tensor([expected]))


def test_k1_and_k3_are_unbiased_for_the_true_kl():
    torch.manual_seed(0)
    p = torch.tensor([0.5, 0.3, 0.2])
    q = torch.tensor([0.2, 0.3, 0.5])
    true_kl = float((p * (p / q).log()).sum())
    samples = torch.multinomial(p, 200_000, replacement=True)
    logp, logq = p.log()[samples][None], q.log()[samples][None]
    assert kl_estimate(logp, logq, "k1").mean().item() == pytest.approx(true_kl, abs=5e-3)
    assert kl_estimate(logp, logq, "k3").mean().item() == pytest.approx(true_kl, abs=5e-3)


def test_k3_is_clamped_and_unknown_name_raises():
    got = kl_estimate(torch.tensor([[-30.0]]), torch.tensor([[0.0]]), "k3")
    assert got.item() == 10.0
    with pytest.raises(ValueError, match="k3"):
        kl_estimate(LOGP, REF, "k4")


def test_kl_loss_is_aggregated_and_differentiable():
    logp = LOGP.clone().requires_grad_(True)
    loss, metrics = kl_loss(logp, REF, torch.ones(1, 2), "k1")
    assert loss.item() == pytest.approx(0.0, abs=1e-6)  # (ln2 - ln2) / 2
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.5, 0.5]]))  # d k1 / dlogp = 1
    assert metrics["kl_mean"] == pytest.approx(0.0, abs=1e-6)


def test_fixed_controller_never_moves():
    ctl = FixedKLController(0.05)
    ctl.update(100.0, 64)
    assert ctl.value == 0.05
    other = FixedKLController(0.02)  # a resumed run's recipe sets algorithm.kl_coef=0.02
    other.load_state_dict(ctl.state_dict())
    assert other.value == 0.02  # the recipe's: an override on resume takes effect


def test_adaptive_controller_by_hand():
    ctl = AdaptiveKLController(init_coef=0.1, target=6.0, horizon=100.0)
    ctl.update(9.0, 10)  # e = min(9/6 - 1, 0.2) = 0.2 -> 0.1 * (1 + 0.2*10/100) = 0.102
    assert ctl.value == pytest.approx(0.102)
    ctl.update(3.0, 10)  # e = max(-0.5, -0.2) = -0.2 -> 0.102 * 0.98 = 0.09996
    assert ctl.value == pytest.approx(0.09996)
    ctl.update(6.6, 10)  # e = 0.1 -> * 1.01
    assert ctl.value == pytest.approx(0.09996 * 1.01)
    # a resume restores the coefficient reached; target and horizon stay the recipe's, so
    # `roll resume RUN algorithm.kl_target=...` takes effect
    restored = AdaptiveKLController(1.0, 0.2, 50.0)
    restored.load_state_dict(ctl.state_dict())
    assert (restored.value, restored.target, restored.horizon) == (ctl.value, 0.2, 50.0)


def test_the_default_target_is_per_token_so_a_drifting_policy_raises_the_coefficient():
    """The pipeline passes the mean KL per response token (`actor/kl_reward`). 500-token
    answers at 0.15 nats per token (75 a sequence) are past verl's per-token 0.1, so the
    coefficient rises: e = min(0.15 / 0.1 - 1, 0.2) = 0.2 each step, 64 samples, horizon
    10000. With the per-sequence 6.0 (Ziegler et al., TRL) as the default it fell every
    step instead (e = max(0.15 / 6 - 1, -0.2) = -0.2): 0.05 -> 0.026 in 500 steps."""
    from rollcli.config.presets import resolve_algorithm

    alg = resolve_algorithm({"name": "ppo", "kl_controller": "adaptive", "kl_coef": 0.05})
    assert alg.kl_target == 0.1
    ctl = AdaptiveKLController(alg.kl_coef, alg.kl_target, alg.kl_horizon)
    for _ in range(500):
        ctl.update(0.15, 64)
    assert ctl.value == pytest.approx(0.05 * (1 + 0.2 * 64 / 10000) ** 500)  # 0.0948
    for _ in range(500):  # 0.05 per token, half the target: it falls back
        ctl.update(0.05, 64)
    assert ctl.value == pytest.approx(0.05 * (1.00128 * 0.99872) ** 500)

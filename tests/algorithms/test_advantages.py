"""The estimator table, token-reward shaping, REINFORCE++ and KL-in-reward handling."""

import math
import typing

import pytest
import torch

from rollcli.algorithms.advantages import ADVANTAGE_ESTIMATORS, compute_advantages
from rollcli.algorithms.reinforce_pp import (
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)
from rollcli.algorithms.returns import gae
from rollcli.algorithms.token_rewards import broadcast_to_tokens, token_rewards_from_scores
from rollcli.config.algorithm import AdvantageName

MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


def test_table_matches_config_choices():
    assert set(ADVANTAGE_ESTIMATORS) == set(typing.get_args(AdvantageName))


def test_broadcast_to_tokens():
    got = broadcast_to_tokens(torch.tensor([2.0, 3.0]), MASK)
    torch.testing.assert_close(got, torch.tensor([[2.0, 2.0, 0.0], [3.0, 3.0, 3.0]]))


def test_token_rewards_score_on_last_real_token_minus_kl():
    scores = torch.tensor([1.0, 2.0])
    got = token_rewards_from_scores(scores, MASK)
    torch.testing.assert_close(got, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]]))
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.1, 0.1, 0.1]])
    # -0.5 * kl on real tokens only; the padded kl 0.3 is dropped
    got = token_rewards_from_scores(scores, MASK, kl, kl_coef=0.5)
    expected = torch.tensor([[-0.05, 1.0 - 0.1, 0.0], [-0.05, -0.05, 2.0 - 0.05]])
    torch.testing.assert_close(got, expected)


def test_reinforce_pp_by_hand():
    # returns (gamma 1): row 0 -> [1, 1, pad], row 1 -> [0, 0, 0]
    # real values 1, 1, 0, 0, 0: mean 0.4, unbiased var = (2*0.36 + 3*0.16) / 4 = 0.3
    rewards = token_rewards_from_scores(torch.tensor([1.0, 0.0]), MASK)
    s = math.sqrt(0.3)
    expected = torch.tensor([[0.6 / s, 0.6 / s, 0.0], [-0.4 / s, -0.4 / s, -0.4 / s]])
    torch.testing.assert_close(reinforce_pp_advantages(rewards, MASK), expected)


def test_reinforce_pp_baseline_by_hand():
    # groups of 2: [1, 0] -> centred [0.5, -0.5]; [0, 0] -> [0, 0]; T = 2, all real
    # tokens 0.5, 0.5, -0.5, -0.5, 0, 0, 0, 0: mean 0, unbiased var = 4*0.25 / 7 = 1/7
    got = reinforce_pp_baseline_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.ones(4, 2), 2)
    a = 0.5 / math.sqrt(1 / 7)
    torch.testing.assert_close(got, torch.tensor([[a, a], [-a, -a], [0.0, 0.0], [0.0, 0.0]]))


def test_grpo_with_kl_in_reward_subtracts_kl_to_go():
    # scores [1, 0] in one group: A = +-0.5 / std([1, 0]) = +-0.5 / 0.7071 = +-0.7071
    # kl row 0 = [0.2, 0.4], coef 0.5 -> kl rewards [-0.1, -0.2] -> to-go [-0.3, -0.2]
    kl = torch.tensor([[0.2, 0.4], [0.0, 0.0]])
    adv, ret = compute_advantages(
        "grpo",
        scores=torch.tensor([1.0, 0.0]),
        mask=torch.ones(2, 2),
        group_size=2,
        kl=kl,
        kl_coef=0.5,
    )
    h = 0.5 / math.sqrt(0.5)
    expected = torch.tensor([[h - 0.3, h - 0.2], [-h, -h]])
    torch.testing.assert_close(adv, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(ret, adv)


def test_rloo_through_the_table():
    adv, _ = compute_advantages(
        "rloo", scores=torch.tensor([1.0, 0.0, 0.0, 3.0]), mask=torch.ones(4, 1), group_size=2
    )
    # [1, 0] -> 1 - 0 = 1, 0 - 1 = -1; [0, 3] -> -3, 3
    torch.testing.assert_close(adv, torch.tensor([[1.0], [-1.0], [-3.0], [3.0]]))


def test_gae_and_reinforce_read_dense_rewards_with_kl():
    torch.manual_seed(5)
    scores, values, kl = torch.randn(2), torch.randn(2, 3), torch.rand(2, 3)
    adv, ret = compute_advantages(
        "gae", scores=scores, values=values, mask=MASK, kl=kl, kl_coef=0.1, gamma=0.9, lam=0.8
    )
    want_adv, want_ret = gae(
        token_rewards_from_scores(scores, MASK, kl, 0.1), values, MASK, 0.9, 0.8
    )
    torch.testing.assert_close(adv, want_adv)
    torch.testing.assert_close(ret, want_ret)
    # reinforce, gamma 1, no KL: every real token gets the score
    adv, ret = compute_advantages("reinforce", scores=torch.tensor([2.0, -1.0]), mask=MASK)
    torch.testing.assert_close(adv, torch.tensor([[2.0, 2.0, 0.0], [-1.0, -1.0, -1.0]]))


def test_whiten_and_clip_are_applied_last():
    adv, _ = compute_advantages(
        "reinforce", scores=torch.tensor([3.0, -1.0]), mask=MASK, advantage_clip=2.0
    )
    torch.testing.assert_close(adv, torch.tensor([[2.0, 2.0, 0.0], [-1.0, -1.0, -1.0]]))
    adv, _ = compute_advantages(
        "reinforce", scores=torch.tensor([3.0, -1.0]), mask=MASK, whiten=True
    )
    real = adv[MASK.bool()]
    assert real.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert real.std().item() == pytest.approx(1.0, abs=1e-4)


def test_misuse_is_an_error_not_silence():
    scores, mask = torch.tensor([1.0, 0.0]), torch.ones(2, 2)
    with pytest.raises(ValueError, match="rloo"):
        compute_advantages("rlooo", scores=scores, mask=mask)
    with pytest.raises(ValueError, match="not both"):
        compute_advantages(
            "reinforce", token_rewards=torch.ones(2, 2), kl=torch.ones(2, 2), kl_coef=0.1, mask=mask
        )
    with pytest.raises(ValueError, match="sequence-level"):
        compute_advantages("grpo", token_rewards=torch.ones(2, 2), scores=scores, mask=mask)
    with pytest.raises(ValueError, match="values"):
        compute_advantages("gae", scores=scores, mask=mask)

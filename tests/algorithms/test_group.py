"""GRPO, RLOO and score normalisation against hand numbers and loops."""

import math

import pytest
import torch

from rollcli.algorithms.gigpo import group_normalize
from rollcli.algorithms.group import grpo_advantages, normalize_scores, rloo_advantages
from rollcli.algorithms.normalization import RunningMeanStd, clip_abs

SCORES = torch.tensor([1.0, 0.0, 0.0, 3.0, 1.0, 2.0])  # two groups of 3


def test_grpo_by_hand():
    # group 0: mean 1/3, unbiased var = (4/9 + 1/9 + 1/9) / 2 = 1/3, std = 0.57735
    # group 1: mean 2, deviations 1, -1, 0, var = 2/2 = 1, std = 1
    s = math.sqrt(1 / 3)
    expected = torch.tensor([(2 / 3) / s, (-1 / 3) / s, (-1 / 3) / s, 1.0, -1.0, 0.0])
    torch.testing.assert_close(grpo_advantages(SCORES, 3), expected, atol=1e-5, rtol=0)


def test_grpo_without_std_is_mean_centering():
    expected = torch.tensor([2 / 3, -1 / 3, -1 / 3, 1.0, -1.0, 0.0])
    torch.testing.assert_close(grpo_advantages(SCORES, 3, norm_std=False), expected)


def test_grpo_degenerate_groups_give_zero_not_nan():
    out = grpo_advantages(torch.tensor([1.0, 1.0, 0.0, 0.0]), 2)
    torch.testing.assert_close(out, torch.zeros(4))
    torch.testing.assert_close(grpo_advantages(torch.tensor([3.0, -1.0]), 1), torch.zeros(2))


def test_rloo_by_hand():
    # group 0: 1 - (0+0)/2 = 1; 0 - (1+0)/2 = -0.5 (twice)
    # group 1: 3 - (1+2)/2 = 1.5; 1 - (3+2)/2 = -1.5; 2 - (3+1)/2 = 0
    expected = torch.tensor([1.0, -0.5, -0.5, 1.5, -1.5, 0.0])
    torch.testing.assert_close(rloo_advantages(SCORES, 3), expected)


def test_group_size_errors():
    with pytest.raises(ValueError, match="groups of 4"):
        grpo_advantages(SCORES, 4)
    with pytest.raises(ValueError, match="group_size >= 2"):
        rloo_advantages(SCORES, 1)


def test_grpo_and_rloo_match_loops():
    torch.manual_seed(4)
    n = 5
    scores = torch.randn(4 * n)
    grpo, rloo = grpo_advantages(scores, n, eps=0.0), rloo_advantages(scores, n)
    for g in range(4):
        vals = scores[g * n : (g + 1) * n].tolist()
        mean = sum(vals) / n
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1))
        for k, v in enumerate(vals):
            assert grpo[g * n + k].item() == pytest.approx((v - mean) / std, abs=1e-5)
            others = (sum(vals) - v) / (n - 1)
            assert rloo[g * n + k].item() == pytest.approx(v - others, abs=1e-5)


def test_normalize_scores_modes():
    scores = torch.tensor([1.0, 2.0, 3.0, 4.0])
    # batch: mean 2.5, unbiased var = (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3
    expected = (scores - 2.5) / math.sqrt(5 / 3)
    torch.testing.assert_close(normalize_scores(scores, 2, "batch"), expected, atol=1e-5, rtol=0)
    # group of 2: [1, 2] -> mean 1.5, std 0.7071 -> -0.7071, 0.7071
    half = 0.5 / math.sqrt(0.5)
    group = normalize_scores(scores, 2, "group")
    torch.testing.assert_close(group, torch.tensor([-half, half, -half, half]), atol=1e-5, rtol=0)
    centred = normalize_scores(scores, 2, "group", norm_std=False)
    torch.testing.assert_close(centred, torch.tensor([-0.5, 0.5, -0.5, 0.5]))
    assert normalize_scores(scores, 2, "none") is scores
    with pytest.raises(ValueError, match="group"):
        normalize_scores(scores, 2, "running")


def test_running_mean_std_merges_batches_and_round_trips():
    rms = RunningMeanStd(eps=0.0)
    rms.update(torch.tensor([1.0, 2.0, 3.0]))
    rms.update(torch.tensor([4.0, 5.0]))
    # same as the stats of 1..5: mean 3, population variance (4+1+0+1+4)/5 = 2
    assert rms.mean == pytest.approx(3.0)
    assert rms.var == pytest.approx(2.0)
    assert rms.count == 5
    out = rms.normalize(torch.tensor([5.0]), update=False)
    assert out.item() == pytest.approx(2 / math.sqrt(2))
    other = RunningMeanStd()
    other.load_state_dict(rms.state_dict())
    assert (other.mean, other.var, other.count) == (rms.mean, rms.var, rms.count)


def test_clip_abs():
    x = torch.tensor([-3.0, 0.5, 2.0])
    torch.testing.assert_close(clip_abs(x, 1.0), torch.tensor([-1.0, 0.5, 1.0]))
    assert clip_abs(x, None) is x
    with pytest.raises(ValueError):
        clip_abs(x, 0.0)


@pytest.mark.parametrize("score", [0.1, 0.9, 1.1, 100.3])
def test_a_group_of_equal_scores_gets_exactly_zero(score):
    # fp32 means of equal values are an ulp off them while the std is exactly 0: the group
    # used to get ulp / eps (-0.056 for eight 0.9s, 0.83 for 100.3) instead of 0
    scores = torch.tensor([score] * 8 + [0.0, 1.0] * 4)
    for advantages in (
        grpo_advantages(scores, 8),
        grpo_advantages(scores, 8, norm_std=False),
        rloo_advantages(scores, 8),
        normalize_scores(scores[:8], 8, mode="batch"),
    ):
        assert advantages[:8].tolist() == [0.0] * 8
    assert grpo_advantages(scores, 8)[8:].abs().min() > 0.9  # the mixed group keeps its signal


def test_gigpo_groups_of_equal_values_get_exactly_zero():
    assert group_normalize([0.9] * 8, ["a"] * 8) == [0.0] * 8

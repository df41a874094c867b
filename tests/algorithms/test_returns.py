"""GAE and reward-to-go against hand-computed numbers and a per-row loop."""

import pytest
import torch

from rollcli.algorithms.returns import gae, reinforce_return


def test_gae_by_hand_full_row():
    # r = [0, 0, 1], V = [0.5, 0.6, 0.7], gamma 0.9, lam 0.8 (gamma*lam = 0.72)
    # t=2: delta = 1 + 0 - 0.7 = 0.3                    A2 = 0.3
    # t=1: delta = 0 + 0.9*0.7 - 0.6 = 0.03             A1 = 0.03 + 0.72*0.3   = 0.246
    # t=0: delta = 0 + 0.9*0.6 - 0.5 = 0.04             A0 = 0.04 + 0.72*0.246 = 0.21712
    adv, ret = gae(
        torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([[0.5, 0.6, 0.7]]), torch.ones(1, 3), 0.9, 0.8
    )
    torch.testing.assert_close(adv, torch.tensor([[0.21712, 0.246, 0.3]]))
    torch.testing.assert_close(ret, torch.tensor([[0.71712, 0.846, 1.0]]))  # A + V


def test_gae_by_hand_padding_and_inner_mask():
    rewards = torch.tensor([[0.0, 1.0, 0.0], [0.0, 5.0, 1.0]])
    values = torch.tensor([[0.5, 0.6, 9.9], [0.5, 9.9, 0.7]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    # row 0 (right padding): t=1: delta = 1 - 0.6 = 0.4, A1 = 0.4
    #   t=0: delta = 0.9*0.6 - 0.5 = 0.04, A0 = 0.04 + 0.72*0.4 = 0.328
    # row 1 (t=1 is an env token, transparent; its reward 5 and value 9.9 are ignored):
    #   t=2: delta = 1 - 0.7 = 0.3, A2 = 0.3
    #   t=0: bootstraps from V(2): delta = 0.9*0.7 - 0.5 = 0.13, A0 = 0.13 + 0.72*0.3 = 0.346
    adv, ret = gae(rewards, values, mask, 0.9, 0.8)
    torch.testing.assert_close(adv, torch.tensor([[0.328, 0.4, 0.0], [0.346, 0.0, 0.3]]))
    torch.testing.assert_close(ret, torch.tensor([[0.828, 1.0, 0.0], [0.846, 0.0, 1.0]]))


def test_gae_lambda_one_is_monte_carlo_minus_value():
    torch.manual_seed(0)
    rewards, values = torch.randn(3, 5), torch.randn(3, 5)
    mask = torch.ones(3, 5)
    adv, _ = gae(rewards, values, mask, gamma=1.0, lam=1.0)
    torch.testing.assert_close(adv, reinforce_return(rewards, mask, 1.0) - values)


def _gae_loop(rewards, values, mask, gamma, lam):
    adv = torch.zeros_like(values)
    for i in range(values.shape[0]):
        real = [t for t in range(values.shape[1]) if mask[i, t]]
        running, next_v = 0.0, 0.0
        for t in reversed(real):
            delta = rewards[i, t].item() + gamma * next_v - values[i, t].item()
            running = delta + gamma * lam * running
            adv[i, t] = running
            next_v = values[i, t].item()
    return adv


def test_gae_matches_loop_on_random_input():
    torch.manual_seed(2)
    rewards, values = torch.randn(4, 9), torch.randn(4, 9)
    mask = (torch.rand(4, 9) > 0.3).float()
    adv, ret = gae(rewards, values, mask, 0.97, 0.9)
    want = _gae_loop(rewards, values, mask, 0.97, 0.9)
    torch.testing.assert_close(adv, want)
    torch.testing.assert_close(ret, (want + values) * mask)


def test_reinforce_return_by_hand():
    # gamma 0.5, r = [0, 0, 1] -> G = [0.25, 0.5, 1]
    got = reinforce_return(torch.tensor([[0.0, 0.0, 1.0]]), torch.ones(1, 3), 0.5)
    torch.testing.assert_close(got, torch.tensor([[0.25, 0.5, 1.0]]))
    # padding reward 7 is ignored: G1 = 2, G0 = 0 + 0.5*2 = 1
    got = reinforce_return(torch.tensor([[0.0, 2.0, 7.0]]), torch.tensor([[1, 1, 0]]), 0.5)
    torch.testing.assert_close(got, torch.tensor([[1.0, 2.0, 0.0]]))


def test_reinforce_return_matches_loop():
    torch.manual_seed(3)
    rewards, mask = torch.randn(3, 6), (torch.rand(3, 6) > 0.3).float()
    got = reinforce_return(rewards, mask, 0.9)
    for i in range(3):
        running = 0.0
        for t in reversed(range(6)):
            if mask[i, t]:
                running = rewards[i, t].item() + 0.9 * running
                assert got[i, t].item() == pytest.approx(running, abs=1e-5)
            else:
                assert got[i, t].item() == 0.0


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="values"):
        gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))

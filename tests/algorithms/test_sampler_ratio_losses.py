"""pg and topr off-policy (`algorithms/objective.rl_loss`): their ratio is to the sampler
`mu` (the engine's log-probs), not to `pi_old`; pg takes a correction of `pi_theta / mu`,
topr tapers `pi_theta / mu` and takes only what a correction drops. By hand."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.objective import rl_loss, rl_normalisers
from rollcli.algorithms.off_policy import kept_tokens
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch

# one response of three tokens: pi_theta = 0.5, 0.2, 0.4 against the sampler's 0.25, 0.4, 0.1,
# so r = pi_theta / mu = 2, 0.5, 4; pi_old (0.5 each: a second epoch's anchor) gives
# pi_old / mu = 2, 1.25, 5 instead, which is what the loss must not read
NEW = torch.log(torch.tensor([[0.5, 0.2, 0.4]]))
MU = torch.log(torch.tensor([[0.25, 0.4, 0.1]]))
OLD = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
MASK = torch.ones(1, 3)


def _loss(
    loss: str, advantages: list[float], with_old: bool = True, **correction: object
) -> tuple[float, torch.Tensor, dict]:
    """The loss, its gradient with respect to the policy's log-probs, and the metrics."""
    args = PolicyUpdateArgs(policy_loss=loss, loss_agg="token-mean", **correction)
    tensors = {"response_mask": MASK, "advantages": torch.tensor([advantages])}
    tensors |= {"behaviour_logprobs": MU} | ({"old_logprobs": OLD} if with_old else {})
    batch = Batch(tensors)
    logprobs = NEW.clone().requires_grad_(True)
    value, metrics = rl_loss(
        batch, logprobs, torch.zeros(1, 3), args, norm_len=3, totals=rl_normalisers(batch, args)
    )
    value.backward()
    return float(value.detach()), logprobs.grad, metrics


def test_pg_with_tis_weighs_each_token_by_its_truncated_ratio_to_the_sampler() -> None:
    """Off-policy REINFORCE: L_t = -sg[min(r_t, 3)] A_t log pi_t with r_t = pi_theta / mu =
    2, 0.5, 4 -> weights 2, 0.5, 3 (against pi_old the middle one would be 1.25)."""
    value, grad, metrics = _loss("pg", [1.0, 1.0, -1.0], correction="tis", correction_cap=3.0)
    w, logp = [2.0, 0.5, 3.0], [math.log(0.5), math.log(0.2), math.log(0.4)]
    adv = [1.0, 1.0, -1.0]
    assert value == pytest.approx(
        sum(-wi * a * lp for wi, a, lp in zip(w, adv, logp, strict=True)) / 3
    )
    torch.testing.assert_close(grad, torch.tensor([[-2.0 / 3, -0.5 / 3, 3.0 / 3]]))
    assert metrics["off_policy_corrected_frac"][0] == pytest.approx(1 / 3)  # 4 truncated
    assert metrics["off_policy_weight_mean"][0] == pytest.approx((2 + 0.5 + 3) / 3)


def test_pg_with_mis_at_sequence_level_drops_a_response_whose_ratio_product_is_too_large() -> None:
    # R = 2 * 0.5 * 4 = 4 > cap 3: every token's weight is 0, no gradient
    _, grad, _ = _loss(
        "pg", [1.0, 1.0, 1.0], correction="mis", correction_level="sequence", correction_cap=3.0
    )
    assert grad.abs().sum() == 0
    # cap 5 keeps it: every token weighs R = 4
    _, grad, _ = _loss(
        "pg", [1.0, 1.0, 1.0], correction="mis", correction_level="sequence", correction_cap=5.0
    )
    torch.testing.assert_close(grad, torch.full((1, 3), -4.0 / 3))


def test_topr_tapers_its_ratio_to_the_sampler_even_on_a_first_pass() -> None:
    """No `old_logprobs` (one epoch: pi_old is this forward), so against pi_old every ratio
    is 1 and the taper never fires. Against mu (2, 0.5, 4): A = +1, -1, -1 gives weights
    1 (positive: none by design), min(0.5, 1) = 0.5, min(4, 1) = 1; L_t = -w A log pi."""
    value, grad, metrics = _loss("topr", [1.0, -1.0, -1.0], with_old=False)
    w, adv = [1.0, 0.5, 1.0], [1.0, -1.0, -1.0]
    logp = [math.log(0.5), math.log(0.2), math.log(0.4)]
    assert value == pytest.approx(
        sum(-wi * a * lp for wi, a, lp in zip(w, adv, logp, strict=True)) / 3
    )
    torch.testing.assert_close(grad, torch.tensor([[-1.0 / 3, 0.5 / 3, 1.0 / 3]]))
    assert metrics["clipfrac"][0] == pytest.approx(1 / 3)  # the negative token at r = 4
    assert metrics["ratio_mean"][0] == pytest.approx((2 + 0.5 + 4) / 3)


def test_topr_with_icepop_drops_the_tokens_outside_the_band_and_keeps_its_own_weights() -> None:
    """band [0.6, 3]: r = 0.5 and 4 leave it; the kept token keeps TOPR's weight 1 (not
    icepop's r = 2)."""
    value, grad, metrics = _loss(
        "topr", [1.0, -1.0, -1.0], correction="icepop", correction_band=(0.6, 3.0)
    )
    assert value == pytest.approx(-math.log(0.5) / 3)
    torch.testing.assert_close(grad, torch.tensor([[-1.0 / 3, 0.0, 0.0]]))
    assert metrics["off_policy_weight_mean"][0] == pytest.approx(1 / 3)
    assert metrics["off_policy_corrected_frac"][0] == pytest.approx(2 / 3)


def test_ppo_still_reads_pi_old_over_mu() -> None:
    """The losses with a ratio to pi_old keep the decoupled weight pi_old / mu = 2, 1.25, 5
    (tis at 3: 2, 1.25, 3)."""
    _, _, metrics = _loss("ppo", [1.0, 1.0, 1.0], correction="tis", correction_cap=3.0)
    assert metrics["off_policy_weight_mean"][0] == pytest.approx((2 + 1.25 + 3) / 3)


def test_kept_tokens_by_hand() -> None:
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    assert kept_tokens("tis", NEW, MU, mask).tolist() == [[1.0, 1.0, 0.0]]
    assert kept_tokens("mis", NEW, MU, MASK, cap=3.0).tolist() == [[1.0, 1.0, 0.0]]
    assert kept_tokens("mis", NEW, MU, MASK, cap=3.0, level="sequence").tolist() == [[0, 0, 0]]
    assert kept_tokens("icepop", NEW, MU, MASK, band=(0.45, 3.0)).tolist() == [[1.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="per token"):
        kept_tokens("icepop", NEW, MU, MASK, level="sequence")

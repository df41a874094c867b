"""The RL objective (`algorithms/objective.py`) against a hand computation, and split into
micro-batches whose losses add up to the whole batch's."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.objective import rl_loss, rl_normalisers
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch

# two responses of 2 and 1 tokens; advantage +1 for the first, -2 for the second
MASK = [[1.0, 1.0], [1.0, 0.0]]
ADV = [[1.0, 1.0], [-2.0, 0.0]]
NEW = [[-1.0, -2.0], [-0.5, 0.0]]
OLD = [[-1.0, -2.5], [-1.0, 0.0]]  # log-ratios 0, 0.5 (clipped at 1.2), 0.5 (A < 0: unclipped)
REF = [[-1.5, -2.0], [-0.5, 0.0]]  # k1 = logprob - ref: 0.5, 0, 0
ENT = [[0.3, 0.6], [0.9, 0.0]]
ARGS = PolicyUpdateArgs(
    policy_loss="ppo",
    clip_low=0.2,
    clip_high=0.2,
    loss_agg="seq-mean-token-mean",
    entropy_coef=0.01,
    kl_loss_coef=0.1,
    kl_estimator="k1",
)


def _batch(rows: slice = slice(None)) -> Batch:
    tensors = {"response_mask": MASK, "advantages": ADV, "old_logprobs": OLD, "ref_logprobs": REF}
    return Batch({k: torch.tensor(v)[rows] for k, v in tensors.items()})


def test_the_loss_is_the_hand_computed_objective() -> None:
    batch = _batch()
    logprobs = torch.tensor(NEW, requires_grad=True)
    loss, metrics = rl_loss(
        batch, logprobs, torch.tensor(ENT), ARGS, norm_len=2, totals=rl_normalisers(batch, ARGS)
    )
    r = math.exp(0.5)
    # PPO per token: -min(r A, clip(r, 0.8, 1.2) A)
    row1 = (-1.0 + -1.2) / 2  # token 2: r = 1.65 with A = +1 is clipped to 1.2
    row2 = -min(r * -2.0, 1.2 * -2.0)  # A = -2: the unclipped r * A is the smaller
    policy = (row1 + row2) / 2  # seq-mean-token-mean
    entropy = (0.3 + 0.6 + 0.9) / 3  # token mean
    kl = ((0.5 + 0.0) / 2 + 0.0) / 2  # aggregated like the policy term
    assert float(loss.detach()) == pytest.approx(policy - 0.01 * entropy + 0.1 * kl, rel=1e-6)
    assert metrics["entropy"] == (pytest.approx(entropy), 3.0)  # weighted by its tokens
    assert metrics["kl"][0] == pytest.approx((0.5 + 0.0 + 0.0) / 3)  # reported as a token mean


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_micro_batch_losses_add_up_to_the_batchs(agg: str) -> None:
    args = PolicyUpdateArgs(**{**ARGS.__dict__, "loss_agg": agg})
    whole = _batch()
    totals = rl_normalisers(whole, args)
    new, ent = torch.tensor(NEW), torch.tensor(ENT)
    full, _ = rl_loss(whole, new, ent, args, norm_len=2, totals=totals)
    parts = [
        rl_loss(_batch(rows), new[rows], ent[rows], args, norm_len=2, totals=totals)[0]
        for rows in (slice(0, 1), slice(1, 2))
    ]
    assert float(sum(parts)) == pytest.approx(float(full), rel=1e-6)

"""`agentic.keep_top_groups` on a batch of hand-made episodes: exactly the expected groups
are trained on, and the advantages and the loss are those of the kept groups alone."""

from __future__ import annotations

import pytest
import torch
from agentic_steps import agentic_step_advantages

from rollcli.algorithms.kl import FixedKLController
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.pipelines.rl.episode_batch import (
    episodes_to_batch,
    keep_informative_groups,
)
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits

# 3 groups of 2 episodes: returns [1, 0] (std 0.5), [-0.1, -0.1] (none), [0.5, -0.1] (0.3)
RETURNS = [[1.0, 0.0], [-0.1, -0.1], [0.5, -0.1]]


@pytest.fixture(scope="module")
def episodes(tiny_model) -> list[Episode]:
    from rollcli.strategies.hf_model import load_tokenizer

    fmt = TurnFormat(load_tokenizer(tiny_model), "RULES")
    out = []
    for g, returns in enumerate(RETURNS):
        for r in returns:
            ep = Episode(EpisodeSpec(len(out), g, 100 + g))
            ep.start({"observation": "o", "state_key": "s"}, fmt, "o")
            ep.add_reply({"token_ids": [101, 102, 103], "text": "x", "finished": True})
            result = {"observation": "o", "reward": r, "terminated": True, "info": {}}
            ep.observe(result, fmt, Limits(2, 4096, 8), "o")
            out.append(ep)
    return out


def test_keeps_exactly_the_groups_with_the_largest_spread(episodes) -> None:
    batch = episodes_to_batch(episodes, 0)
    kept, metrics = keep_informative_groups(batch, 0.5)  # ceil(1.5) = 2 places
    assert kept is not None and kept["group"] == [0, 0, 2, 2]
    assert kept["scores"].tolist() == pytest.approx([1.0, 0.0, 0.5, -0.1])
    assert metrics == {"agentic/informative_groups": pytest.approx(2 / 3), "agentic/kept_groups": 2}
    one, _ = keep_informative_groups(batch, 1 / 3)
    assert one["group"] == [0, 0]
    every, metrics = keep_informative_groups(batch, 1.0)
    assert every is batch and metrics["agentic/kept_groups"] == 3


def test_nothing_kept_when_every_group_scored_alike(episodes) -> None:
    batch = episodes_to_batch(episodes[2:4], 0)  # the -0.1, -0.1 group alone
    kept, metrics = keep_informative_groups(batch, 0.5)
    assert kept is None
    assert metrics == {"agentic/informative_groups": 0.0, "agentic/kept_groups": 0.0}


def _advantages(batch, **alg) -> torch.Tensor:
    agentic_step_advantages(
        AlgorithmConfig(**alg),
        batch,
        group_size=2,
        mode="starpo",
        max_new_tokens=8,
        kl_ctl=FixedKLController(0),
    )
    return batch["advantages"]


def test_advantages_and_loss_are_those_of_the_kept_groups(episodes) -> None:
    # batch-normalised returns, mean only: the baseline is the mean over the rows trained on
    alg = dict(advantage="reinforce", norm_mode="batch", norm_std=False)
    full = episodes_to_batch(episodes, 0)
    kept, _ = keep_informative_groups(episodes_to_batch(episodes, 0), 0.5)
    adv_full, adv_kept = _advantages(full, **alg), _advantages(kept, **alg)
    mask = kept["response_mask"].bool()
    # all six: mean 0.2 -> episode 0 gets 0.8; the four kept: mean 0.35 -> 0.65
    assert adv_full[0, full["response_mask"][0].bool()].tolist() == pytest.approx([0.8] * 3)
    assert adv_kept[0, mask[0]].tolist() == pytest.approx([0.65] * 3)
    assert adv_kept[:, 0].tolist() == pytest.approx([0.65, -0.35, 0.15, -0.45])
    # the PPO loss on-policy (ratio 1) is -mean(A) over the kept rows' tokens only
    # (every row has the same 3 model tokens)
    out = [
        compute_policy_loss("ppo", PolicyLossInputs(
            logprobs=torch.zeros_like(b["advantages"]), advantages=_advantages(
                b, advantage="reinforce"), mask=b["response_mask"], old_logprobs=torch.zeros_like(
                b["advantages"]), clip_low=0.2, clip_high=0.28, agg="token-mean",
        ))[0]
        for b in (full, kept)
    ]  # fmt: skip
    assert float(out[0]) == pytest.approx(-(1.0 + 0.0 - 0.1 - 0.1 + 0.5 - 0.1) / 6)
    assert float(out[1]) == pytest.approx(-(1.0 + 0.0 + 0.5 - 0.1) / 4)

"""Finished episodes → the training batch, with StarPO or GiGPO advantages.

One row per episode in the rollout layout of `rollcli.data.padding`: the first prompt
(system + first observation) left-padded, then the rest of the conversation as the
"response". `response_mask` is the episode's loss mask: 1 on the model's tokens, 0 on the
environment's turns in between (and on padding). Episodes whose env crashed, or that never
got a reply, are left out (see `Episode.trainable`); group baselines use the episodes of a
group that remain.
"""

from __future__ import annotations

import torch

from rollcli.algorithms.gigpo import (
    gigpo_step_advantages,
    group_normalize,
    group_rloo,
    turn_token_values,
)
from rollcli.algorithms.token_rewards import broadcast_to_tokens, token_rewards_from_scores
from rollcli.data.batch import Batch
from rollcli.data.padding import pad_right, rollout_tensors
from rollcli.pipelines.agentic_episode import Episode


def episodes_to_batch(episodes: list[Episode], pad_id: int) -> Batch:
    """The trainable episodes as one batch: tensors for the model, fields for advantages."""
    rows = [ep for ep in episodes if ep.trainable]
    if not rows:
        raise ValueError("no trainable episode (every env crashed or no reply was made)")
    tensors = rollout_tensors([e.prompt_ids for e in rows], [e.response_ids for e in rows], pad_id)
    width = tensors["response_mask"].shape[1]
    loss_mask, _ = pad_right([e.loss_mask for e in rows], 0, width=width)  # values, 0-padded
    tensors["response_mask"] = loss_mask.float()
    tensors["scores"] = torch.tensor([e.episode_return for e in rows], dtype=torch.float32)
    tensors["finished"] = torch.tensor([e.end != "context" for e in rows], dtype=torch.bool)
    fields = {
        "group": [e.spec.group for e in rows],
        "turn_spans": [list(e.turn_spans) for e in rows],
        "step_rewards": [list(e.rewards) for e in rows],
        "state_keys": [list(e.state_keys) for e in rows],
    }
    return Batch(tensors, fields)


def agentic_advantages(
    batch: Batch,
    *,
    mode: str,
    estimator: str = "grpo",
    norm_std: bool = True,
    step_weight: float = 1.0,
    step_gamma: float = 0.95,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(advantages, token_rewards)`, both `[B, R]` and 0 off the model's tokens.

    `token_rewards` holds each episode's return on its last model token (StarPO's
    placement); with gamma = 1 its reward-to-go on every model token is the return, so the
    episode advantage is the group-normalised return on every model token. `mode="gigpo"`
    adds `step_weight` times the step-level advantage of each turn on that turn's tokens.
    """
    mask = batch["response_mask"]
    returns = batch["scores"]
    groups = batch["group"]
    if estimator == "grpo":
        episode = group_normalize(returns.tolist(), groups, norm_std)
    elif estimator == "rloo":
        episode = group_rloo(returns.tolist(), groups)
    else:
        raise ValueError(f"the agentic pipeline supports grpo and rloo, not {estimator!r}")
    advantages = broadcast_to_tokens(torch.tensor(episode, dtype=torch.float32), mask)
    if mode == "gigpo":
        steps = gigpo_step_advantages(
            batch["step_rewards"], batch["state_keys"], groups, step_gamma, norm_std
        )
        step_tokens = turn_token_values(batch["turn_spans"], steps, mask.shape[1])
        advantages = advantages + step_weight * step_tokens * mask
    elif mode != "starpo":
        raise ValueError(f"agentic mode must be starpo or gigpo, not {mode!r}")
    return advantages, token_rewards_from_scores(returns, mask)

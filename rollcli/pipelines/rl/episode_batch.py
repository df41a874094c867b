"""Finished episodes → the training batch, and its advantages through rlvr's stage.

One row per episode in the rollout layout of `rollcli.data.padding`: the first prompt
(system + first observation) left-padded, then the rest of the conversation as the
"response". `response_mask` is the episode's loss mask: 1 on the model's tokens, 0 on the
environment's turns in between (and on padding). `scores` is the episode return, placed
on its last model token by the token-level estimators (StarPO's placement). Given the
tokenizer, `action_mask` is 1 on the first token of each reply's action (`first_action_token`):
the actor takes the entropy bonus there and reports that token's entropy.

Advantages go through `rollcli.pipelines.rl.advantages.add_advantages`, the stage rlvr
uses too, so every `algorithm:` key means the same here (the keys that cannot apply are refused
at load, `rollcli.config.agentic_algorithm`). The agentic inputs are explicit: a group is
the episodes sharing an env seed (contiguous rows), and `agentic.mode: gigpo` adds the
step-level term. An episode whose env crashed, or that never got a reply, is not trained
on (see `Episode.trainable`), and neither is the rest of its group: the stage compares
groups of equal size. `agentic.keep_top_groups` then keeps the groups with the largest
spread of returns (`keep_informative_groups`, StarPO-S).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Hashable, Sequence
from typing import Any

import torch

from rollcli.algorithms.gigpo import gigpo_step_advantages, turn_token_values
from rollcli.algorithms.group_filter import MIN_STD, group_reward_std, top_variance_groups
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    ACTION_MASK,
    BEHAVIOUR_LOGPROBS,
    FINISHED,
    PROMPT_WIDTH,
    RESPONSE_MASK,
    ROUTED_EXPERTS,
    SCORES,
)
from rollcli.data.padding import pad_right, rollout_tensors
from rollcli.pipelines.rl.advantages import STEP_ADVANTAGES
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode
from rollcli.rollout.result import routing_rows

DRIVER_FIELDS = ("group", "turn_spans", "step_rewards", "state_keys")  # the trainer's not


def episodes_to_batch(episodes: list[Episode], pad_id: int, fmt: TurnFormat | None = None) -> Batch:
    """The trainable groups' episodes as one batch: tensors for the model, fields for
    advantages. `finished` is False for an episode cut by the context limit (what
    `algorithm.mask_truncated` drops). With the turn format `fmt`, `action_mask` too."""
    broken = {e.spec.group for e in episodes if not e.trainable}
    rows = [e for e in episodes if e.spec.group not in broken]
    if not rows:
        raise ValueError(
            "no trainable group of episodes (in every group an env crashed or no reply was made)"
        )
    tensors = rollout_tensors([e.prompt_ids for e in rows], [e.response_ids for e in rows], pad_id)
    width = tensors[RESPONSE_MASK].shape[1]
    loss_mask, _ = pad_right([e.loss_mask for e in rows], 0, width=width)  # values, 0-padded
    tensors[RESPONSE_MASK] = loss_mask.float()
    tensors[SCORES] = torch.tensor([e.episode_return for e in rows], dtype=torch.float32)
    tensors[FINISHED] = torch.tensor([e.end != "context" for e in rows], dtype=torch.bool)
    if all(e.behaviour is not None for e in rows):  # mismatch metrics, `algorithm.off_policy`
        behaviour = torch.zeros(len(rows), width)
        for i, e in enumerate(rows):
            behaviour[i, : len(e.behaviour)] = torch.tensor(e.behaviour, dtype=torch.float32)
        tensors[BEHAVIOUR_LOGPROBS] = behaviour
    if all(e.routing is not None for e in rows):  # an MoE sampler's (routing replay)
        width = int(tensors[PROMPT_WIDTH][0])
        prompts = [e.prompt_ids for e in rows]
        routing = [e.routing for e in rows]
        tensors[ROUTED_EXPERTS] = routing_rows(routing, prompts, width, tensors["input_ids"])
    if fmt is not None:
        starts = [first_action_positions(e, fmt) for e in rows]
        tensors[ACTION_MASK] = torch.zeros_like(loss_mask, dtype=torch.float32)
        for row, positions in enumerate(starts):
            tensors[ACTION_MASK][row, positions] = 1.0
    fields: dict[str, list[Any]] = {
        "group": [e.spec.group for e in rows],
        "turn_spans": [list(e.turn_spans) for e in rows],
        "step_rewards": [list(e.rewards) for e in rows],
        "state_keys": [list(e.state_keys) for e in rows],
    }
    return Batch(tensors, fields)


_ACTION_START = re.compile(r"<answer>\s*[^\s<]")  # the action's first character


def first_action_token(reply_ids: Sequence[int], fmt: TurnFormat) -> int | None:
    """Index in `reply_ids` of the token that holds the first character of the action: the
    first non-space character after `<answer>` in the assistant turn (`fmt.reply_prefix` +
    the reply). None: the reply names no action there.

    Tokens are decoded one by one, so the offsets are those of the decoded pieces."""
    pieces = [fmt.tokenizer.decode([t]) for t in reply_ids]
    match = _ACTION_START.search(fmt.reply_prefix + "".join(pieces))
    if match is None or match.end() - 1 < len(fmt.reply_prefix):
        return None
    offset = match.end() - 1 - len(fmt.reply_prefix)
    ends = itertools.accumulate(len(p) for p in pieces)
    return next(k for k, end in enumerate(ends) if end > offset)


def first_action_positions(episode: Episode, fmt: TurnFormat) -> list[int]:
    """Where each reply's first action token sits in `episode.response_ids`."""
    out = []
    for start, stop in episode.turn_spans:
        k = first_action_token(episode.response_ids[start:stop], fmt)
        if k is not None:
            out.append(start + k)
    return out


def contiguous_group_size(groups: Sequence[Hashable]) -> int:
    """The size of the groups of `groups` (one id per row), which must be contiguous runs
    of equal length.

    >>> contiguous_group_size([3, 3, 7, 7])
    2
    """
    runs: list[int] = []
    seen: set[Hashable] = set()
    for i, g in enumerate(groups):
        if i and g == groups[i - 1]:
            runs[-1] += 1
            continue
        if g in seen:
            raise ValueError(f"the episodes of group {g!r} are not contiguous rows")
        seen.add(g)
        runs.append(1)
    if not runs or len(set(runs)) != 1:
        raise ValueError(f"groups of unequal sizes {runs}: the advantage stage needs equal ones")
    return runs[0]


def keep_informative_groups(batch: Batch, keep_frac: float) -> tuple[Batch | None, dict]:
    """The batch's groups that `top_variance_groups` keeps (None: not one), and the metrics
    `agentic/informative_groups` (the fraction of groups whose returns differ, before
    filtering) and `agentic/kept_groups` (how many groups are trained on)."""
    size = contiguous_group_size(batch["group"])
    informative = group_reward_std(batch[SCORES], size) > MIN_STD
    keep = top_variance_groups(batch[SCORES], size, keep_frac)
    metrics = {
        "agentic/informative_groups": float(informative.float().mean()),
        "agentic/kept_groups": float(keep.sum()),
    }
    if not keep.any():
        return None, metrics
    rows = keep.repeat_interleave(size).nonzero().squeeze(1)
    return (batch if keep.all() else batch.select(rows)), metrics


def gigpo_step_tokens(batch: Batch, step_gamma: float, norm_std: bool) -> torch.Tensor:
    """GiGPO's step-level advantage `A^S` of each turn on that turn's tokens, `[B, R]`."""
    steps = gigpo_step_advantages(
        batch["step_rewards"], batch["state_keys"], batch["group"], step_gamma, norm_std
    )
    return turn_token_values(batch["turn_spans"], steps, batch[RESPONSE_MASK].shape[1])


def set_step_advantages(
    batch: Batch, mode: str, step_weight: float, step_gamma: float, norm_std: bool
) -> None:
    """`mode="gigpo"`: set `STEP_ADVANTAGES`, `step_weight * A^S` on each turn's tokens, which
    the advantage stage adds before whitening and clipping; `mode="starpo"`: nothing."""
    if mode == "gigpo":
        batch.set(STEP_ADVANTAGES, step_weight * gigpo_step_tokens(batch, step_gamma, norm_std))
    elif mode != "starpo":
        raise ValueError(f"agentic mode must be starpo or gigpo, not {mode!r}")

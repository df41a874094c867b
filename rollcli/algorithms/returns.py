"""Token-level returns: GAE and the discounted reward-to-go.

Both walk the response backwards, one real token at a time. A masked position (padding,
or an environment/tool token inside a multi-turn response) is *transparent*: it gets
advantage and return 0, its reward and value are ignored, and the running quantities
pass through it unchanged, so the token before it bootstraps from the next *real* token.
The value after the last real token is 0 (the episode ends with the response).
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check(name: str, x: Tensor, mask: Tensor) -> None:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(
            f"{name} and mask must both be [B, T]; got {tuple(x.shape)} and {tuple(mask.shape)}"
        )


@torch.no_grad()
def gae(
    token_rewards: Tensor, values: Tensor, mask: Tensor, gamma: float = 1.0, lam: float = 1.0
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2015, arXiv:1506.02438).

    For real tokens, with `t'` the next real token after `t` (and `V(t') = 0` past the end):

        delta_t = r_t + gamma * V(t') - V(t)
        A_t     = delta_t + gamma * lam * A_{t'}
        R_t     = A_t + V(t)          (the critic's regression target)

    Returns `(advantages, returns)`, both `[B, T]`, 0 at masked positions, detached.
    `lam=1` gives the Monte-Carlo return minus the value; `lam=0` the one-step TD error.
    """
    _check("token_rewards", token_rewards, mask)
    _check("values", values, mask)
    m = mask.to(values.dtype)
    rewards = token_rewards.to(values.dtype) * m
    batch, length = values.shape
    next_value = values.new_zeros(batch)
    running = values.new_zeros(batch)
    advantages = torch.zeros_like(values)
    for t in reversed(range(length)):
        real = m[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        step = delta + gamma * lam * running
        advantages[:, t] = step * real
        # Masked positions leave the running quantities untouched.
        running = real * step + (1 - real) * running
        next_value = real * values[:, t] + (1 - real) * next_value
    returns = (advantages + values) * m
    return advantages, returns


@torch.no_grad()
def reinforce_return(token_rewards: Tensor, mask: Tensor, gamma: float = 1.0) -> Tensor:
    """Discounted reward-to-go (Williams 1992, REINFORCE).

        G_t = r_t + gamma * G_{t'}      (t' = next real token; G = 0 past the end)

    With the sequence score on the last real token and `gamma=1`, every real token of a
    sample gets that score. Returns `[B, T]`, 0 at masked positions, detached.
    """
    _check("token_rewards", token_rewards, mask)
    m = mask.to(token_rewards.dtype if token_rewards.is_floating_point() else torch.float32)
    rewards = token_rewards.to(m.dtype) * m
    batch, length = rewards.shape
    running = rewards.new_zeros(batch)
    returns = torch.zeros_like(rewards)
    for t in reversed(range(length)):
        real = m[:, t]
        step = rewards[:, t] + gamma * running
        returns[:, t] = step * real
        running = real * step + (1 - real) * running
    return returns

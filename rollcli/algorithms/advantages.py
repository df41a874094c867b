"""Advantage estimators chosen by name (`algorithm.advantage`).

`compute_advantages(name, ...)` is the one entry the pipelines call. Estimators fall in
two kinds, and the kind decides how a KL penalty in the reward (`algorithm.kl_in:
reward`) reaches the advantage:

* **token-level** (`gae`, `reinforce`, `reinforce_pp`) read a dense reward `[B, T]`:
  `token_rewards` if given, else `token_rewards_from_scores(scores, mask, kl, kl_coef)`,
  i.e. the score on the last real token minus `kl_coef * kl_t` on every token.
* **sequence-level** (`grpo`, `rloo`, `reinforce_pp_baseline`) compute their baseline
  from the sequence `scores` `[B]` alone (the KL is never group-normalised with the
  task reward). The KL penalty is then subtracted token-wise: each token adds the
  discounted reward-to-go of `-kl_coef * kl` (`reinforce_pp_baseline` does this before
  its whitening, `grpo`/`rloo` after their normalisation). Passing `token_rewards` to a
  sequence-level estimator is an error, so nothing is silently ignored.

Every estimator returns `(advantages, returns)`, both `[B, T]`, detached, 0 where
masked. `step_advantages` (GiGPO's weighted step-level term of an agentic episode, see
`rollcli.algorithms.gigpo`) are added to the estimator's advantages before whitening and
clipping. `returns` is the critic's target for `gae`, the reward-to-go for `reinforce`
and `reinforce_pp`, and equal to the advantages for the sequence-level estimators.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from rollcli.algorithms.group import grpo_advantages, rloo_advantages
from rollcli.algorithms.masked import masked_whiten
from rollcli.algorithms.normalization import clip_abs
from rollcli.algorithms.reinforce_pp import (
    reinforce_pp_advantages,
    reinforce_pp_baseline_advantages,
)
from rollcli.algorithms.returns import gae, reinforce_return
from rollcli.algorithms.token_rewards import broadcast_to_tokens, token_rewards_from_scores


@dataclass(frozen=True)
class _Inputs:
    mask: Tensor
    scores: Tensor | None
    token_rewards: Tensor | None
    values: Tensor | None
    kl_rewards: Tensor | None  # -kl_coef * kl, [B, T], or None
    group_size: int
    gamma: float
    lam: float
    norm_std: bool
    eps: float

    def dense_rewards(self) -> Tensor:
        if self.token_rewards is not None:
            return self.token_rewards
        rewards = token_rewards_from_scores(_need(self.scores, "scores"), self.mask)
        if self.kl_rewards is not None:
            rewards = rewards + self.kl_rewards
        return rewards

    def with_kl(self, seq_advantages: Tensor) -> Tensor:
        advantages = broadcast_to_tokens(seq_advantages, self.mask)
        if self.kl_rewards is not None:
            advantages = advantages + reinforce_return(self.kl_rewards, self.mask, self.gamma)
        return advantages


def _need(x: Tensor | None, name: str) -> Tensor:
    if x is None:
        raise ValueError(f"this advantage estimator needs `{name}`")
    return x


def _gae(x: _Inputs) -> tuple[Tensor, Tensor]:
    return gae(x.dense_rewards(), _need(x.values, "values"), x.mask, x.gamma, x.lam)


def _reinforce(x: _Inputs) -> tuple[Tensor, Tensor]:
    returns = reinforce_return(x.dense_rewards(), x.mask, x.gamma)
    return returns, returns


def _reinforce_pp(x: _Inputs) -> tuple[Tensor, Tensor]:
    rewards = x.dense_rewards()
    advantages = reinforce_pp_advantages(rewards, x.mask, x.gamma)
    return advantages, reinforce_return(rewards, x.mask, x.gamma)


def _grpo(x: _Inputs) -> tuple[Tensor, Tensor]:
    seq = grpo_advantages(_need(x.scores, "scores"), x.group_size, x.norm_std, x.eps)
    advantages = x.with_kl(seq)
    return advantages, advantages


def _rloo(x: _Inputs) -> tuple[Tensor, Tensor]:
    advantages = x.with_kl(rloo_advantages(_need(x.scores, "scores"), x.group_size))
    return advantages, advantages


def _reinforce_pp_baseline(x: _Inputs) -> tuple[Tensor, Tensor]:
    advantages = reinforce_pp_baseline_advantages(
        _need(x.scores, "scores"), x.mask, x.group_size, x.kl_rewards, x.gamma
    )
    return advantages, advantages


ADVANTAGE_ESTIMATORS: dict[str, Callable[[_Inputs], tuple[Tensor, Tensor]]] = {
    "gae": _gae,
    "reinforce": _reinforce,
    "grpo": _grpo,
    "rloo": _rloo,
    "reinforce_pp": _reinforce_pp,
    "reinforce_pp_baseline": _reinforce_pp_baseline,
}
SEQUENCE_LEVEL_ESTIMATORS: frozenset[str] = frozenset({"grpo", "rloo", "reinforce_pp_baseline"})


@torch.no_grad()
def compute_advantages(
    estimator: str,
    *,
    mask: Tensor,
    scores: Tensor | None = None,
    token_rewards: Tensor | None = None,
    values: Tensor | None = None,
    kl: Tensor | None = None,
    kl_coef: float = 0.0,
    group_size: int = 1,
    gamma: float = 1.0,
    lam: float = 1.0,
    norm_std: bool = True,
    eps: float = 1e-6,
    whiten: bool = False,
    advantage_clip: float | None = None,
    step_advantages: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Advantages and returns `[B, T]` from the estimator named `estimator`.

    Args:
        mask: `[B, T]` response mask.
        scores: `[B]` sequence rewards (after reward clipping / normalisation / penalties).
        token_rewards: `[B, T]` dense rewards for token-level estimators; when None they
            are built from `scores` (and `kl`). Mutually exclusive with `kl`.
        values: `[B, T]` critic values (`gae` only).
        kl: `[B, T]` per-token KL estimate for KL-in-reward; used when `kl_coef > 0`.
        group_size: samples per prompt (contiguous rows) for group estimators.
        gamma, lam: discount and GAE lambda.
        norm_std: divide by the group std (`grpo`).
        whiten: whiten the final advantages over the batch (PPO's usual step).
        advantage_clip: clamp the final advantages to `[-c, c]` (None = off).
        step_advantages: `[B, T]` added to the estimator's advantages before `whiten` and
            `advantage_clip` (GiGPO's `omega * A^S` on each turn's tokens); None = none.

    See the module docstring for how KL-in-reward is applied per estimator kind.
    """
    if estimator not in ADVANTAGE_ESTIMATORS:
        raise ValueError(
            f"unknown advantage estimator {estimator!r}; "
            f"choose one of {sorted(ADVANTAGE_ESTIMATORS)}"
        )
    kl_used = kl if kl is not None and kl_coef > 0 else None
    use_kl = kl_used is not None
    if token_rewards is not None and use_kl:
        raise ValueError("pass either token_rewards (with any KL already in it) or kl, not both")
    if token_rewards is not None and estimator in SEQUENCE_LEVEL_ESTIMATORS:
        raise ValueError(
            f"{estimator!r} is sequence-level: it reads `scores`, not `token_rewards` "
            "(pass `kl` and `kl_coef` for a KL penalty in the reward)"
        )
    m = mask.float()
    kl_rewards = -kl_coef * kl_used.float() * m if kl_used is not None else None
    inputs = _Inputs(
        mask=m,
        scores=scores,
        token_rewards=token_rewards,
        values=values,
        kl_rewards=kl_rewards,
        group_size=group_size,
        gamma=gamma,
        lam=lam,
        norm_std=norm_std,
        eps=eps,
    )
    advantages, returns = ADVANTAGE_ESTIMATORS[estimator](inputs)
    if step_advantages is not None:
        advantages = advantages + step_advantages.to(advantages.dtype) * m
    if whiten:
        advantages = masked_whiten(advantages, m)
    advantages = clip_abs(advantages, advantage_clip) * m
    return advantages, returns

"""Corrections for rollouts sampled by a slightly different policy, and how far apart the two are.

The inference engine (vLLM, SGLang) computes log-probs with other kernels, precision
or an older weight version (async rollout) than the trainer, so the sampler `mu` and the
trainer's `pi_old` differ. Every function here takes the trainer's log-probs of the sampled
tokens (`old_logprobs`, `[B, T]`), the sampler's (`behaviour_logprobs`) and the response
mask, and works on the per-token ratio

    r_t = pi_old(y_t) / mu(y_t) = exp(logp_old_t - logp_mu_t)

A correction returns detached per-token weights `[B, T]` (0 at masked positions) that the
policy loss multiplies into its per-token terms (`is_weights`); a weight of 0 removes the
token's gradient but the token still counts in the loss's denominator, as in IcePop's
objective (the `1/|y_i|` of eq. 3 stays). The numerator is `pi_old` for the losses whose own
ratio is to it (ppo, gspo, raftpp: decoupled PPO, Hilton et al. 2021); pg and topr have no
ratio to `pi_old`, and the objective passes the policy's own log-probs `pi_theta` (detached)
instead, so that their ratio is to the sampler (`objective.off_policy_weights`). The
corrections (`algorithm.off_policy.correction`):

* `tis`, truncated importance sampling (Yao et al. 2025, "Your efficient RL framework
  secretly brings you off-policy RL training"): `w_t = min(r_t, C)`; at `sequence` level
  every token of a response gets `min(R, C)` with `R = prod_t r_t` (the sequence-level
  truncated IS of Liu et al. 2025, below).
* `mis`, masked importance sampling (Liu, Li et al. 2025, "When speed kills stability:
  demystifying RL collapse from the training-inference mismatch"): a ratio above `C` is not
  truncated but dropped, `w_t = r_t * 1[r_t <= C]`; at `sequence` level `w_t = R * 1[R <= C]`
  for every token of the response, so one outlier token drops its whole response.
* `icepop` (Ling team 2025, "Every step evolves: scaling RL for trillion-scale thinking
  model", arXiv:2510.18855, eq. 3-4): token level, `w_t = r_t * 1[alpha <= r_t <= beta]`,
  tokens whose ratio leaves the band `[alpha, beta]` in either direction get no gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

Correction = Literal["none", "tis", "mis", "icepop"]
Level = Literal["token", "sequence"]
CORRECTIONS: tuple[str, ...] = ("none", "tis", "mis", "icepop")
# |log r| beyond this is clamped before `exp` in the metrics (a ratio of e^20 is already absurd)
LOG_RATIO_LIMIT = 20.0


def _check(old_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor) -> None:
    if not old_logprobs.shape == behaviour_logprobs.shape == mask.shape:
        raise ValueError(
            f"old_logprobs {tuple(old_logprobs.shape)}, behaviour_logprobs "
            f"{tuple(behaviour_logprobs.shape)} and mask {tuple(mask.shape)} must have one shape"
        )


def _sequence_log_ratio(old_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor) -> Tensor:
    """`log R_i = sum_t mask_t (logp_old_t - logp_mu_t)`, `[B, 1]`."""
    m = mask.to(old_logprobs.dtype)
    return ((old_logprobs - behaviour_logprobs) * m).sum(dim=-1, keepdim=True)


def _level_log_ratio(
    old_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor, level: Level
) -> Tensor:
    """`[B, T]`: `log r_t` at `token` level, `log R_i` on every token of response `i` at
    `sequence` level."""
    if level == "token":
        return old_logprobs - behaviour_logprobs
    return _sequence_log_ratio(old_logprobs, behaviour_logprobs, mask).expand_as(mask)


@torch.no_grad()
def truncated_is_weights(
    old_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor, cap: float = 2.0
) -> Tensor:
    """Per-token TIS weights `[B, T]`: `w_t = min(exp(logp_old_t - logp_mu_t), cap)`.

    Detached, 0 at masked positions. Pass the result as `is_weights` to a policy loss.
    """
    return _truncated(old_logprobs - behaviour_logprobs, mask, cap)


def _truncated(log_ratio: Tensor, mask: Tensor, cap: float) -> Tensor:
    """`min(exp(log_ratio), cap)`, 0 where `mask` is; the log is clamped first, so a huge
    ratio never overflows to inf."""
    if cap <= 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    log_w = log_ratio.clamp(max=math.log(cap))
    return log_w.exp().clamp(max=cap) * mask.to(log_w.dtype)


@torch.no_grad()
def tis_weights(
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    cap: float = 2.0,
    level: Level = "token",
) -> Tensor:
    """TIS: `min(r_t, cap)` per token, or `min(R_i, cap)` on every token of response `i`.

    >>> old, mu = torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.25, 1.0]]))
    >>> tis_weights(old, mu, torch.ones(1, 2), cap=1.5).tolist()
    [[1.5, 0.5]]
    >>> tis_weights(old, mu, torch.ones(1, 2), cap=1.5, level="sequence").tolist()  # R = 1
    [[1.0, 1.0]]
    """
    _check(old_logprobs, behaviour_logprobs, mask)
    if level == "token":
        return truncated_is_weights(old_logprobs, behaviour_logprobs, mask, cap)
    return _truncated(_sequence_log_ratio(old_logprobs, behaviour_logprobs, mask), mask, cap)


@torch.no_grad()
def mis_weights(
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    cap: float = 2.0,
    level: Level = "token",
) -> Tensor:
    """MIS: `r_t * 1[r_t <= cap]` per token, or `R_i * 1[R_i <= cap]` on every token of
    response `i` (a ratio above the cap is dropped, not truncated).

    >>> old, mu = torch.log(torch.tensor([[0.5, 0.5]])), torch.log(torch.tensor([[0.25, 1.0]]))
    >>> mis_weights(old, mu, torch.ones(1, 2), cap=1.5).tolist()
    [[0.0, 0.5]]
    """
    _check(old_logprobs, behaviour_logprobs, mask)
    if cap <= 0:
        raise ValueError(f"MIS cap must be > 0, got {cap}")
    m = mask.to(old_logprobs.dtype)
    log_r = _level_log_ratio(old_logprobs, behaviour_logprobs, mask, level)
    return _ratio_within(log_r, -math.inf, math.log(cap), m)


def _ratio_within(log_r: Tensor, low: float, high: float, m: Tensor) -> Tensor:
    """`exp(log_r)` where `low <= log_r <= high`, else 0; times the mask `m`. The exp is
    taken on the clamped log only, so a dropped ratio of e^100 never becomes inf * 0 = nan."""
    keep = (log_r >= low) & (log_r <= high)
    return torch.where(keep, log_r.clamp(max=high).exp(), torch.zeros_like(m)) * m


@torch.no_grad()
def icepop_weights(
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    band: tuple[float, float] = (0.5, 2.0),
) -> Tensor:
    """IcePop: `r_t * 1[band[0] <= r_t <= band[1]]` per token.

    >>> old = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    >>> mu = torch.log(torch.tensor([[0.2, 0.4, 1.0]]))  # r = 2.5, 1.25, 0.5
    >>> icepop_weights(old, mu, torch.ones(1, 3), band=(0.5, 2.0)).tolist()
    [[0.0, 1.25, 0.5]]
    """
    _check(old_logprobs, behaviour_logprobs, mask)
    low, high = band
    if not 0 < low < high:
        raise ValueError(f"IcePop band must be 0 < low < high, got {band}")
    m = mask.to(old_logprobs.dtype)
    return _ratio_within(old_logprobs - behaviour_logprobs, math.log(low), math.log(high), m)


@dataclass(frozen=True)
class _Rule:
    """What a correction does: its weights (None: it weighs nothing), the band of log-ratios
    whose tokens it keeps (None: it drops no token), and whether it is defined per token only."""

    weights: Callable[[Tensor, Tensor, Tensor, Level, float, tuple[float, float]], Tensor] | None
    kept_band: Callable[[float, tuple[float, float]], tuple[float, float]] | None
    token_only: bool = False


# the corrections by name, read in one place (`_rule`); the weights take
# (old_logprobs, behaviour_logprobs, mask, level, cap, band)
_RULES: dict[str, _Rule] = {
    "none": _Rule(weights=None, kept_band=None),
    "tis": _Rule(lambda old, mu, m, level, cap, band: tis_weights(old, mu, m, cap, level), None),
    "mis": _Rule(
        lambda old, mu, m, level, cap, band: mis_weights(old, mu, m, cap, level),
        lambda cap, band: (-math.inf, math.log(cap)),
    ),
    "icepop": _Rule(
        lambda old, mu, m, level, cap, band: icepop_weights(old, mu, m, band),
        lambda cap, band: (math.log(band[0]), math.log(band[1])),
        token_only=True,
    ),
}


def _rule(correction: str, level: Level) -> _Rule:
    """The rule of the correction named `correction`, refused at a level it is not defined at."""
    if correction not in _RULES:
        raise ValueError(f"unknown correction {correction!r}; choose one of {CORRECTIONS}")
    rule = _RULES[correction]
    if rule.token_only and level != "token":
        raise ValueError(f"{correction} is defined per token; level must be 'token'")
    return rule


@torch.no_grad()
def kept_tokens(
    correction: Correction,
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    *,
    level: Level = "token",
    cap: float = 2.0,
    band: tuple[float, float] = (0.5, 2.0),
) -> Tensor:
    """`[B, T]` 1 where the correction keeps a token's gradient, 0 where it drops it and at
    masked positions: `none` and `tis` drop nothing, `mis` a ratio above `cap` (at `sequence`
    level every token of a response whose `R` is), `icepop` a ratio outside `band`. What a
    loss that weighs its tokens itself (topr) takes from a correction.

    >>> old = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    >>> mu = torch.log(torch.tensor([[0.2, 0.4, 1.0]]))  # r = 2.5, 1.25, 0.5
    >>> kept_tokens("icepop", old, mu, torch.ones(1, 3), band=(0.6, 2.0)).tolist()
    [[0.0, 1.0, 0.0]]
    >>> kept_tokens("mis", old, mu, torch.ones(1, 3), cap=2.0).tolist()
    [[0.0, 1.0, 1.0]]
    """
    _check(old_logprobs, behaviour_logprobs, mask)
    m = mask.to(old_logprobs.dtype)
    rule = _rule(correction, level)
    if rule.kept_band is None:
        return m.clone()
    low, high = rule.kept_band(cap, band)
    log_r = _level_log_ratio(old_logprobs, behaviour_logprobs, mask, level)
    return ((log_r >= low) & (log_r <= high)).to(m.dtype) * m


def correction_weights(
    correction: Correction,
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    *,
    level: Level = "token",
    cap: float = 2.0,
    band: tuple[float, float] = (0.5, 2.0),
) -> tuple[Tensor, dict[str, float]] | None:
    """The correction named `correction` (None for `none`) and its metrics over the real
    tokens: `off_policy_weight_mean` (mean weight) and `off_policy_corrected_frac` (share of
    tokens whose weight is not their plain ratio: truncated by `tis`, dropped by `mis` and
    `icepop`; at sequence level a response's tokens count together)."""
    rule = _rule(correction, level)
    if rule.weights is None:
        return None
    old = old_logprobs.detach()
    weights = rule.weights(old, behaviour_logprobs, mask, level, cap, band)
    m = mask.to(weights.dtype)
    if level == "token":
        plain = (old - behaviour_logprobs).clamp(max=LOG_RATIO_LIMIT).exp()
    else:
        seq = _sequence_log_ratio(old, behaviour_logprobs, mask).clamp(max=LOG_RATIO_LIMIT)
        plain = seq.exp().expand_as(m)
    changed = ~torch.isclose(weights, plain, rtol=1e-6, atol=0.0)
    count = m.sum().clamp(min=1)
    return weights, {
        "off_policy_weight_mean": float((weights * m).sum() / count),
        "off_policy_corrected_frac": float((changed.to(m.dtype) * m).sum() / count),
    }


@torch.no_grad()
def mismatch_metrics(
    old_logprobs: Tensor,
    behaviour_logprobs: Tensor,
    mask: Tensor,
    band: tuple[float, float] = (0.5, 2.0),
) -> dict[str, float]:
    """How far the sampler `mu` is from the trainer's `pi_old` on the sampled tokens, over the
    real tokens of `mask` (NaN-free; a batch without real tokens gives zeros):

    * `mismatch_kl`: the k3 estimate of `KL(mu || pi_old)` per token, `mean(r - 1 - log r)`
      (Schulman 2020, "Approximating KL divergence"): unbiased under sampling from `mu`, as
      the tokens were, and never negative; 0 when the two agree.
    * `mismatch_ratio_mean`, `_min`, `_max`: the mean and extremes of `r_t`.
    * `mismatch_outside_band`: the share of tokens with `r_t` outside `band` (IcePop's).

    >>> old = torch.log(torch.tensor([[0.5, 0.5, 0.5]]))
    >>> mu = torch.log(torch.tensor([[0.25, 0.5, 0.1]]))  # r = 2, 1, 5; the third is padding
    >>> m = mismatch_metrics(old, mu, torch.tensor([[1.0, 1.0, 0.0]]))
    >>> round(m["mismatch_kl"], 4), m["mismatch_ratio_max"], m["mismatch_outside_band"]
    (0.1534, 2.0, 0.0)
    """
    _check(old_logprobs, behaviour_logprobs, mask)
    m = mask.to(old_logprobs.dtype)
    real = m > 0
    if not bool(real.any()):
        return dict.fromkeys(MISMATCH_KEYS, 0.0)
    log_r = (old_logprobs - behaviour_logprobs).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    r = log_r.exp()
    count = m.sum()
    low, high = band
    outside = (r < low) | (r > high)
    return {
        "mismatch_kl": float(((r - 1 - log_r) * m).sum() / count),
        "mismatch_ratio_mean": float((r * m).sum() / count),
        "mismatch_ratio_min": float(r[real].min()),
        "mismatch_ratio_max": float(r[real].max()),
        "mismatch_outside_band": float((outside.to(m.dtype) * m).sum() / count),
    }


MISMATCH_KEYS = (
    "mismatch_kl",
    "mismatch_ratio_mean",
    "mismatch_ratio_min",
    "mismatch_ratio_max",
    "mismatch_outside_band",
)

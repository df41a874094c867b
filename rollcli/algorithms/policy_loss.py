"""Policy-gradient losses chosen by name (`algorithm.policy_loss`).

Every loss takes per-token log-probabilities `[B, T]` of the sampled response under the
policy being trained (`logprobs`, with gradient) and under the policy that sampled the
batch at the start of this update (`old_logprobs`), advantages `[B, T]` and the mask,
and returns `(loss, metrics)`. Shared keyword arguments:

* `agg`, `norm_len`: loss aggregation, see `rollcli.algorithms.aggregation`;
* `is_weights`: optional `[B, T]` weights of the off-policy correction
  (`off_policy.correction_weights`), multiplied into the per-token loss (detached).

Metrics (floats): `pg_loss`, `clipfrac` (share of real tokens whose gradient the clip
removed), `ratio_mean` (mean `pi/pi_old` over real tokens), `approx_kl` (k3 estimate of
`KL(pi_old || pi)` over real tokens), plus loss-specific ones; `old_logprobs` is whatever
the caller passes as the ratio's denominator (`mu` for topr, see `topr_loss`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.masked import masked_mean

LOG_RATIO_LIMIT = 20.0
# the losses whose importance ratio is to the sampler `mu` (the engine's log-probs), not to
# `pi_old`: `pg` has none of its own, so its correction weighs `pi_theta / mu`, and `topr`
# tapers `pi_theta / mu` (`objective.rl_loss`; config.algorithm keeps the same tuple)
SAMPLER_RATIO_LOSSES = ("pg", "topr")
# GSPO's sequence log-ratio is clamped above at this value (verl's GSPO loss uses 10 too)
SEQ_LOG_RATIO_LIMIT = 10.0


def _log_ratio(logprobs: Tensor, old_logprobs: Tensor) -> Tensor:
    return (logprobs - old_logprobs.detach()).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def _apply_is(loss_mat: Tensor, is_weights: Tensor | None) -> Tensor:
    return loss_mat if is_weights is None else loss_mat * is_weights.detach()


def _ratio_metrics(log_ratio: Tensor, mask: Tensor) -> dict[str, float]:
    lr = log_ratio.detach()
    ratio = lr.exp()
    return {
        "ratio_mean": float(masked_mean(ratio, mask)),
        "approx_kl": float(masked_mean((ratio - 1) - lr, mask)),
    }


def ppo_clip_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    norm_len: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017, arXiv:1707.06347), per token.

        r_t = exp(logp_t - logp_old_t)
        L_t = max(-A_t r_t, -A_t clip(r_t, 1 - clip_low, 1 + clip_high))

    Separate low/high bounds give DAPO's clip-higher (Yu et al. 2025, arXiv:2503.14476).
    With `dual_clip = c > 1` (Ye et al. 2020, arXiv:1912.09729) negative-advantage
    tokens are further bounded: `L_t = min(L_t, -A_t c)` when `A_t < 0`, so a huge
    ratio cannot blow up the loss. Extra metric: `dual_clipfrac`.
    """
    m = mask.to(logprobs.dtype)
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = log_ratio.exp()
    adv = advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    metrics = {"clipfrac": float(masked_mean((clipped > unclipped).float(), m))}
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        bound = -adv * dual_clip
        hit = (adv < 0) & (loss_mat > bound)
        loss_mat = torch.where(adv < 0, torch.minimum(loss_mat, bound), loss_mat)
        metrics["dual_clipfrac"] = float(masked_mean(hit.float(), m))
    loss = aggregate_loss(_apply_is(loss_mat, is_weights), m, agg, norm_len)
    return loss, {"pg_loss": float(loss.detach()), **metrics, **_ratio_metrics(log_ratio, m)}


def raftpp_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    norm_len: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """RAFT++ (Xiong et al. 2025, arXiv:2504.11343): PPO clip on positive samples only.

    RAFT is rejection-sampling fine-tuning: train on the accepted (rewarded) samples.
    RAFT++ adds PPO's importance ratio and clipping. Here the PPO loss is computed with
    the mask restricted to tokens whose advantage is > 0, so pair it with an estimator
    whose sign follows the reward (the `raftpp` preset uses `reinforce`). Extra metric:
    `keep_frac`, the share of real tokens kept.
    """
    m = mask.to(logprobs.dtype)
    kept = aggregation_mask("raftpp", m, advantages)
    loss, metrics = ppo_clip_loss(
        logprobs,
        old_logprobs,
        advantages,
        kept,
        clip_low=clip_low,
        clip_high=clip_high,
        dual_clip=dual_clip,
        agg=agg,
        norm_len=norm_len,
        is_weights=is_weights,
    )
    metrics["keep_frac"] = float(masked_mean(kept, m))
    return loss, metrics


def gspo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 3e-4,
    clip_high: float = 4e-4,
    agg: str = "seq-mean-token-mean",
    norm_len: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """GSPO, group sequence policy optimisation (Zheng et al. 2025, arXiv:2507.18071).

    The importance ratio is per sequence, the geometric mean of the token ratios:

        s_i   = exp( 1/|y_i| sum_t (logp_t - logp_old_t) )
        L_i,t = max(-A_i,t s_i,t, -A_i,t clip(s_i,t, 1 - clip_low, 1 + clip_high))

    in the paper's GSPO-token form `s_i,t = sg[s_i] * pi(y_t) / sg[pi(y_t)]`: equal to
    `s_i` in value, with the gradient flowing through each token's log-prob. With the
    default `seq-mean-token-mean` aggregation and a sequence advantage broadcast to its
    tokens this is exactly the sequence-level GSPO objective. The paper's clip ranges are
    tiny (3e-4, 4e-4) because `s_i` is a length-normalised ratio.

    The log of `s_i,t` is clamped above at `SEQ_LOG_RATIO_LIMIT` (10), gradient path
    included: a sequence whose mean log-ratio is past it (`s_i > e^10`) is clipped, so
    with `A < 0` it gets no gradient, as clipped PPO gives it, instead of one `~s_i`
    large (the per-token clamp at 20 alone let a mean log-ratio of 12 through, a
    gradient of ~1e4). Extra metric: `seq_ratio_mean` (of the unclamped ratio).
    """
    m = mask.to(logprobs.dtype)
    log_ratio = _log_ratio(logprobs, old_logprobs)
    seq_log_ratio = masked_mean(log_ratio.detach(), m, dim=-1)
    token_log_s = seq_log_ratio.unsqueeze(-1) + logprobs - logprobs.detach()
    s = token_log_s.clamp(max=SEQ_LOG_RATIO_LIMIT).exp()
    adv = advantages.detach()
    unclipped = -adv * s
    clipped = -adv * s.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    loss = aggregate_loss(_apply_is(loss_mat, is_weights), m, agg, norm_len)
    has_tokens = (m.sum(dim=-1) > 0).to(m.dtype)
    return loss, {
        "pg_loss": float(loss.detach()),
        "clipfrac": float(masked_mean((clipped > unclipped).float(), m)),
        "seq_ratio_mean": float(masked_mean(seq_log_ratio.exp(), has_tokens)),
        **_ratio_metrics(log_ratio, m),
    }


def topr_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    agg: str = "token-mean",
    norm_len: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """TOPR, tapered off-policy REINFORCE (Le Roux et al. 2025, arXiv:2503.14286).

        L_t = -A_t logp_t                               if A_t >= 0  (plain, SFT-like)
        L_t = -sg[min(r_t, 1)] A_t logp_t               if A_t <  0  (truncated IS)

    with `r_t = exp(logp_t - logp_old_t)`, the ratio to the policy that sampled the
    batch: the RL objective passes the engine's log-probs `mu` as `old_logprobs` where the
    engine sent them (the paper's behaviour policy; `pi_old` would make the ratio 1 on the
    first pass however far the sampler was), else `pi_old`. Positive samples are pushed up
    at full strength whatever the ratio; negative samples are pushed down only as much as
    the policy still puts mass on them, which keeps training stable off-policy. The paper
    truncates the sequence ratio; this version truncates per token. `clipfrac` counts
    negative tokens whose ratio was truncated at 1.
    """
    m = mask.to(logprobs.dtype)
    log_ratio = _log_ratio(logprobs, old_logprobs)
    ratio = log_ratio.detach().exp()
    adv = advantages.detach()
    negative = adv < 0
    weight = torch.where(negative, ratio.clamp(max=1.0), torch.ones_like(ratio))
    loss_mat = -weight * adv * logprobs
    loss = aggregate_loss(_apply_is(loss_mat, is_weights), m, agg, norm_len)
    return loss, {
        "pg_loss": float(loss.detach()),
        "clipfrac": float(masked_mean((negative & (ratio > 1.0)).float(), m)),
        "negative_frac": float(masked_mean(negative.float(), m)),
        **_ratio_metrics(log_ratio, m),
    }


def pg_loss(
    logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    old_logprobs: Tensor | None = None,
    agg: str = "token-mean",
    norm_len: float | None = None,
    is_weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """Vanilla policy gradient, REINFORCE (Williams 1992): `L_t = -A_t logp_t`.

    No ratio and no clipping: correct only on-policy (one update per batch) unless
    `is_weights` corrects for the sampler: the RL objective's weights for pg are the
    correction of `pi_theta / mu`, off-policy REINFORCE with truncated (`tis`) or masked
    (`mis`, `icepop`) importance sampling. `old_logprobs`, when given, only feeds the
    `ratio_mean` / `approx_kl` metrics. `clipfrac` is always 0.
    """
    m = mask.to(logprobs.dtype)
    loss_mat = -advantages.detach() * logprobs
    loss = aggregate_loss(_apply_is(loss_mat, is_weights), m, agg, norm_len)
    log_ratio = (
        _log_ratio(logprobs, old_logprobs) if old_logprobs is not None else torch.zeros_like(m)
    )
    return loss, {"pg_loss": float(loss.detach()), "clipfrac": 0.0, **_ratio_metrics(log_ratio, m)}


POLICY_LOSSES: dict[str, Callable[..., tuple[Tensor, dict[str, float]]]] = {
    "ppo": ppo_clip_loss,
    "gspo": gspo_loss,
    "topr": topr_loss,
    "pg": pg_loss,
    "raftpp": raftpp_loss,
}

# Knobs a pipeline may pass to every loss; a loss that has no use for one drops it.
_SHARED_OPTIONAL = frozenset({"old_logprobs", "clip_low", "clip_high", "dual_clip"})


def aggregation_mask(name: str, mask: Tensor, advantages: Tensor) -> Tensor:
    """The tokens the loss `name` aggregates over: `mask`, or for `raftpp` the ones with a
    positive advantage (what micro-batches must be normalised by, see
    `aggregation.micro_batch_share`)."""
    if name == "raftpp":
        return mask * (advantages.detach() > 0).to(mask.dtype)
    return mask


def compute_policy_loss(name: str, **kwargs: Any) -> tuple[Tensor, dict[str, float]]:
    """Call the loss named `name` (a key of `POLICY_LOSSES`) with keyword arguments.

    The pipeline can pass the same keywords whatever the loss: `old_logprobs`,
    `clip_low`, `clip_high` and `dual_clip` are dropped for losses that do not use them
    (e.g. `pg`, `topr`). Any other unknown keyword is a `TypeError`.
    """
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r}; choose one of {sorted(POLICY_LOSSES)}")
    fn = POLICY_LOSSES[name]
    accepted = inspect.signature(fn).parameters
    if kwargs.get("dual_clip") is not None and "dual_clip" not in accepted:
        raise ValueError(f"dual_clip applies to the ppo and raftpp losses, not {name!r}")
    call = {k: v for k, v in kwargs.items() if k in accepted or k not in _SHARED_OPTIONAL}
    return fn(**call)

"""Policy-gradient losses chosen by name (`algorithm.policy_loss`).

Every loss takes one `PolicyLossInputs` (`rollcli.algorithms.loss_inputs`): per-token
log-probabilities `[B, T]` of the sampled response under the policy being trained (with
gradient), under the policy at the start of this update (`pi_old`) and where the engine sent
them under the sampler (`mu`), advantages, the mask, the off-policy correction's weights
(multiplied into the per-token loss, detached), the clip settings and the aggregation; it
returns `(loss, metrics)`.

Metrics (floats): `pg_loss`, `clipfrac` (share of real tokens whose gradient the clip
removed), `ratio_mean` (mean `pi/pi_old` over real tokens), `approx_kl` (k3 estimate of
`KL(pi_old || pi)` over real tokens), plus loss-specific ones; for topr the ratio's
denominator is `mu` where there is one (see `topr_loss`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch import Tensor

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.masked import masked_mean
from rollcli.config.loss_spec import LOSSES, losses_where

LOG_RATIO_LIMIT = 20.0
# GSPO's sequence log-ratio is clamped above at this value (verl's GSPO loss uses 10 too)
SEQ_LOG_RATIO_LIMIT = 10.0

# every policy loss's one signature; each loss's traits (clipped, dual clip, ratio to the
# sampler, ...) are its row of `config.loss_spec.LOSSES`, whose `objective` names it here
PolicyLoss = Callable[[PolicyLossInputs], tuple[Tensor, dict[str, float]]]


def _log_ratio(logprobs: Tensor, anchor: Tensor) -> Tensor:
    return (logprobs - anchor.detach()).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def _apply_is(loss_mat: Tensor, is_weights: Tensor | None) -> Tensor:
    return loss_mat if is_weights is None else loss_mat * is_weights.detach()


def _ratio_metrics(log_ratio: Tensor, mask: Tensor) -> dict[str, float]:
    lr = log_ratio.detach()
    ratio = lr.exp()
    return {
        "ratio_mean": float(masked_mean(ratio, mask)),
        "approx_kl": float(masked_mean((ratio - 1) - lr, mask)),
    }


def ppo_clip_loss(x: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate (Schulman et al. 2017, arXiv:1707.06347), per token.

        r_t = exp(logp_t - logp_old_t)
        L_t = max(-A_t r_t, -A_t clip(r_t, 1 - clip_low, 1 + clip_high))

    Separate low/high bounds give DAPO's clip-higher (Yu et al. 2025, arXiv:2503.14476).
    With `dual_clip = c > 1` (Ye et al. 2020, arXiv:1912.09729) negative-advantage
    tokens are further bounded: `L_t = min(L_t, -A_t c)` when `A_t < 0`, so a huge
    ratio cannot blow up the loss. Extra metric: `dual_clipfrac`.
    """
    m = x.mask.to(x.logprobs.dtype)
    log_ratio = _log_ratio(x.logprobs, x.old())
    ratio = log_ratio.exp()
    adv = x.advantages.detach()
    unclipped = -adv * ratio
    clipped = -adv * ratio.clamp(1.0 - x.clip_low, 1.0 + x.clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    metrics = {"clipfrac": float(masked_mean((clipped > unclipped).float(), m))}
    if x.dual_clip is not None:  # > 1, checked by PolicyLossInputs
        bound = -adv * x.dual_clip
        hit = (adv < 0) & (loss_mat > bound)
        loss_mat = torch.where(adv < 0, torch.minimum(loss_mat, bound), loss_mat)
        metrics["dual_clipfrac"] = float(masked_mean(hit.float(), m))
    loss = aggregate_loss(_apply_is(loss_mat, x.is_weights), m, x.agg, x.norm_len)
    return loss, {"pg_loss": float(loss.detach()), **metrics, **_ratio_metrics(log_ratio, m)}


def raftpp_loss(x: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """RAFT++ (Xiong et al. 2025, arXiv:2504.11343): PPO clip on positive samples only.

    RAFT is rejection-sampling fine-tuning: train on the accepted (rewarded) samples.
    RAFT++ adds PPO's importance ratio and clipping. Here the PPO loss is computed with
    the mask restricted to tokens whose advantage is > 0, so pair it with an estimator
    whose sign follows the reward (the `raftpp` preset uses `reinforce`). Extra metric:
    `keep_frac`, the share of real tokens kept.
    """
    m = x.mask.to(x.logprobs.dtype)
    kept = positive_tokens(m, x.advantages)
    loss, metrics = ppo_clip_loss(dataclasses.replace(x, mask=kept))
    metrics["keep_frac"] = float(masked_mean(kept, m))
    return loss, metrics


def gspo_loss(x: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """GSPO, group sequence policy optimisation (Zheng et al. 2025, arXiv:2507.18071).

    The importance ratio is per sequence, the geometric mean of the token ratios:

        s_i   = exp( 1/|y_i| sum_t (logp_t - logp_old_t) )
        L_i,t = max(-A_i,t s_i,t, -A_i,t clip(s_i,t, 1 - clip_low, 1 + clip_high))

    in the paper's GSPO-token form `s_i,t = sg[s_i] * pi(y_t) / sg[pi(y_t)]`: equal to
    `s_i` in value, with the gradient flowing through each token's log-prob. With the
    `seq-mean-token-mean` aggregation (the `gspo` preset's) and a sequence advantage
    broadcast to its tokens this is exactly the sequence-level GSPO objective. The paper's
    clip ranges are tiny (3e-4, 4e-4, the preset's) because `s_i` is a length-normalised
    ratio.

    The log of `s_i,t` is clamped above at `SEQ_LOG_RATIO_LIMIT` (10), gradient path
    included: a sequence whose mean log-ratio is past it (`s_i > e^10`) is clipped, so
    with `A < 0` it gets no gradient, as clipped PPO gives it, instead of one `~s_i`
    large (the per-token clamp at 20 alone let a mean log-ratio of 12 through, a
    gradient of ~1e4). Extra metric: `seq_ratio_mean` (of the unclamped ratio).
    """
    logprobs, m = x.logprobs, x.mask.to(x.logprobs.dtype)
    log_ratio = _log_ratio(logprobs, x.old())
    seq_log_ratio = masked_mean(log_ratio.detach(), m, dim=-1)
    token_log_s = seq_log_ratio.unsqueeze(-1) + logprobs - logprobs.detach()
    s = token_log_s.clamp(max=SEQ_LOG_RATIO_LIMIT).exp()
    adv = x.advantages.detach()
    unclipped = -adv * s
    clipped = -adv * s.clamp(1.0 - x.clip_low, 1.0 + x.clip_high)
    loss_mat = torch.maximum(unclipped, clipped)
    loss = aggregate_loss(_apply_is(loss_mat, x.is_weights), m, x.agg, x.norm_len)
    has_tokens = (m.sum(dim=-1) > 0).to(m.dtype)
    return loss, {
        "pg_loss": float(loss.detach()),
        "clipfrac": float(masked_mean((clipped > unclipped).float(), m)),
        "seq_ratio_mean": float(masked_mean(seq_log_ratio.exp(), has_tokens)),
        **_ratio_metrics(log_ratio, m),
    }


def topr_loss(x: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """TOPR, tapered off-policy REINFORCE (Le Roux et al. 2025, arXiv:2503.14286).

        L_t = -A_t logp_t                               if A_t >= 0  (plain, SFT-like)
        L_t = -sg[min(r_t, 1)] A_t logp_t               if A_t <  0  (truncated IS)

    with `r_t = exp(logp_t - logp_mu_t)`, the ratio to the policy that sampled the batch:
    the engine's log-probs `mu` (`behaviour_logprobs`) where the engine sent them (the
    paper's behaviour policy; `pi_old` would make the ratio 1 on the first pass however far
    the sampler was), else `pi_old`. Positive samples are pushed up at full strength
    whatever the ratio; negative samples are pushed down only as much as the policy still
    puts mass on them, which keeps training stable off-policy. The paper truncates the
    sequence ratio; this version truncates per token. `is_weights` here are only the
    off-policy correction's drops (1 kept, 0 dropped): the taper is the loss's own
    truncation. `clipfrac` counts negative tokens whose ratio was truncated at 1.
    """
    m = x.mask.to(x.logprobs.dtype)
    log_ratio = _log_ratio(x.logprobs, x.sampler())
    ratio = log_ratio.detach().exp()
    adv = x.advantages.detach()
    negative = adv < 0
    weight = torch.where(negative, ratio.clamp(max=1.0), torch.ones_like(ratio))
    loss_mat = -weight * adv * x.logprobs
    loss = aggregate_loss(_apply_is(loss_mat, x.is_weights), m, x.agg, x.norm_len)
    return loss, {
        "pg_loss": float(loss.detach()),
        "clipfrac": float(masked_mean((negative & (ratio > 1.0)).float(), m)),
        "negative_frac": float(masked_mean(negative.float(), m)),
        **_ratio_metrics(log_ratio, m),
    }


def pg_loss(x: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """Vanilla policy gradient, REINFORCE (Williams 1992): `L_t = -A_t logp_t`.

    No ratio and no clipping: correct only on-policy (one update per batch) unless
    `is_weights` corrects for the sampler: the RL objective's weights for pg are the
    correction of `pi_theta / mu`, off-policy REINFORCE with truncated (`tis`) or masked
    (`mis`, `icepop`) importance sampling. `old_logprobs` only feeds the `ratio_mean` /
    `approx_kl` metrics (1 and 0 on-policy). `clipfrac` is always 0.
    """
    m = x.mask.to(x.logprobs.dtype)
    loss_mat = -x.advantages.detach() * x.logprobs
    loss = aggregate_loss(_apply_is(loss_mat, x.is_weights), m, x.agg, x.norm_len)
    log_ratio = _log_ratio(x.logprobs, x.old())
    return loss, {"pg_loss": float(loss.detach()), "clipfrac": 0.0, **_ratio_metrics(log_ratio, m)}


# each row of `LOSSES` with the function its `objective` names (a row naming none fails here)
_OBJECTIVES = {f.__name__: f for f in (ppo_clip_loss, gspo_loss, topr_loss, pg_loss, raftpp_loss)}
POLICY_LOSSES: dict[str, PolicyLoss] = {
    name: _OBJECTIVES[spec.objective] for name, spec in LOSSES.items()
}


def positive_tokens(mask: Tensor, advantages: Tensor) -> Tensor:
    """`mask` where the advantage is positive (raftpp's tokens)."""
    return mask * (advantages.detach() > 0).to(mask.dtype)


def aggregation_mask(name: str, mask: Tensor, advantages: Tensor) -> Tensor:
    """The tokens the loss `name` aggregates over: `mask`, or for a loss whose row is
    `positive_only` (raftpp) the ones with a positive advantage (what micro-batches must be
    normalised by, see `aggregation.micro_batch_share`)."""
    return positive_tokens(mask, advantages) if LOSSES[name].positive_only else mask


def compute_policy_loss(name: str, inputs: PolicyLossInputs) -> tuple[Tensor, dict[str, float]]:
    """Call the loss named `name` (a key of `POLICY_LOSSES`) with `inputs`.

    Every loss takes the same `PolicyLossInputs` and reads what it needs (pg and topr no
    clip range); a `dual_clip` for a loss without one (`LossSpec.dual_clip`) is refused.
    """
    if name not in POLICY_LOSSES:
        raise ValueError(f"unknown policy loss {name!r}; choose one of {sorted(POLICY_LOSSES)}")
    if inputs.dual_clip is not None and not LOSSES[name].dual_clip:
        with_one = " and ".join(losses_where(dual_clip=True))
        raise ValueError(f"dual_clip applies to the {with_one} losses, not {name!r}")
    return POLICY_LOSSES[name](inputs)

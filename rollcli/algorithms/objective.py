"""The RL objective of one policy step, in one place: what `ActorTrainWorker.train_step`
minimises for every micro-batch, given the policy's log-probs and entropies of its tokens.

    loss = share_pg  * agg(policy loss_t * w_t)                      (PPO clip, GSPO, ...)
         - entropy_coef * share_ent * token-mean(entropy_t)          (over action tokens where
                                                                       the batch marks them)
         + kl_loss_coef * share_kl  * agg(KL_t(pi || pi_ref))       (aggregated like the
                                                                       policy term)

`agg` is `args.loss_agg`; `w_t` the off-policy correction's weights against the sampler's
log-probs `mu` (TIS, MIS, IcePop; `algorithms/off_policy.py`), none without one: of
`pi_old / mu` beside the ratio to `pi_old` of ppo, gspo and raftpp (decoupled PPO), of
`pi_theta / mu` for pg (off-policy REINFORCE), and for topr, which tapers `pi_theta / mu`
itself, only which tokens the correction drops (`off_policy_weights`); each `share` is
this micro-batch's part of the whole mini-batch's denominator
(`aggregation.micro_batch_share`), from `totals`: what `rl_normalisers` computed over the
mini-batch (summed over the data-parallel ranks). So the micro-batches' losses add up to
the mini-batch's loss however the rows are split.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rollcli.algorithms.aggregation import aggregate_loss, loss_normalisers, micro_batch_share
from rollcli.algorithms.kl import kl_loss
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.loss_metrics import Metric, metric_weights
from rollcli.algorithms.off_policy import correction_weights, kept_tokens, mismatch_metrics
from rollcli.algorithms.policy_loss import aggregation_mask, compute_policy_loss
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.config.loss_spec import LOSSES
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    ACTION_MASK,
    ADVANTAGES,
    BEHAVIOUR_LOGPROBS,
    OLD_LOGPROBS,
    REF_LOGPROBS,
    RESPONSE_MASK,
)


def entropy_mask(batch: Batch) -> Tensor:
    """The tokens the entropy bonus covers: `action_mask` within the loss mask where the batch
    has one, else the loss mask itself."""
    mask: Tensor = batch[RESPONSE_MASK]
    if ACTION_MASK in batch:
        action: Tensor = batch[ACTION_MASK]
        return action * mask
    return mask


def rl_normalisers(mini_batch: Batch, args: PolicyUpdateArgs) -> Tensor:
    """The mini-batch's denominators of the three terms (policy, KL, entropy), 3 each: what
    `rl_loss` takes as `totals` once summed over the ranks."""
    mask = mini_batch[RESPONSE_MASK]
    agg_mask = aggregation_mask(args.policy_loss, mask, mini_batch[ADVANTAGES])
    masks = (agg_mask, mask, entropy_mask(mini_batch))
    return torch.cat([loss_normalisers(m) for m in masks])


def rows_with_gradient(batch: Batch, args: PolicyUpdateArgs) -> Tensor:
    """`[B]` bool: the rows whose loss can move the weights. Every loss term of a row is 0
    when the row has no token that both counts in the policy term's aggregation (raftpp:
    the positive-advantage ones) and has a non-zero advantage (every policy loss is the
    advantage times a function of the ratio), and neither the entropy bonus nor a KL term
    is on: such a row's gradient is exactly 0, and the mini-batch's loss and every
    micro-batch's share of it (computed over all rows) are the same without it.

    >>> args = PolicyUpdateArgs(policy_loss="raftpp")
    >>> batch = Batch({"response_mask": torch.ones(3, 2), "advantages": torch.tensor(
    ...     [[1.0, 1.0], [-1.0, -1.0], [0.0, 0.0]])})
    >>> rows_with_gradient(batch, args).tolist()
    [True, False, False]
    >>> rows_with_gradient(batch, PolicyUpdateArgs(policy_loss="ppo")).tolist()
    [True, True, False]
    """
    if args.entropy_coef or (args.kl_loss_coef and REF_LOGPROBS in batch):
        return torch.ones(len(batch), dtype=torch.bool)
    advantages: Tensor = batch[ADVANTAGES]
    counted = aggregation_mask(args.policy_loss, batch[RESPONSE_MASK], advantages) > 0
    return (counted & (advantages != 0)).any(dim=1)


def off_policy_weights(
    args: PolicyUpdateArgs,
    old: Tensor,
    micro: Batch,
    mask: Tensor,
    logprobs: Tensor | None = None,
) -> tuple[Tensor | None, dict[str, float]]:
    """Against the sampler's log-probs `mu` (where the engine sent them): the off-policy
    correction's per-token weights (None with `correction: none`) and the metrics, the
    mismatch ones (`mismatch_*`, of `pi_old / mu`) whatever the correction.

    The ratio the correction reads: `pi_old / mu` for ppo, gspo and raftpp, whose own ratio
    covers `pi_old -> pi_theta`; `pi_theta / mu` (`logprobs`, detached: the policy's, needed
    then) for pg and topr, whose ratio is to the sampler (`LossSpec.sampler_ratio`). topr
    weighs its tokens itself (its taper, `LossSpec.tapers`), so it takes only the
    correction's drops: weight 1 where the correction keeps a token, 0 where it drops it
    (`off_policy.kept_tokens`).
    """
    if BEHAVIOUR_LOGPROBS not in micro:
        return None, {}
    behaviour, old = micro[BEHAVIOUR_LOGPROBS], old.detach()
    metrics = mismatch_metrics(old, behaviour, mask, args.correction_band)
    if args.correction == "none":
        return None, metrics
    numerator, loss = old, LOSSES[args.policy_loss]
    if loss.sampler_ratio:
        if logprobs is None:
            raise ValueError(
                f"the {args.policy_loss} loss's correction needs the policy's logprobs"
            )
        numerator = logprobs.detach()
    level, cap, band = args.correction_level, args.correction_cap, args.correction_band
    if loss.tapers:
        kept = kept_tokens(
            args.correction, numerator, behaviour, mask, level=level, cap=cap, band=band
        )
        m = mask.to(kept.dtype)
        count = m.sum().clamp(min=1)
        return kept, {
            **metrics,
            "off_policy_weight_mean": float((kept * m).sum() / count),
            "off_policy_corrected_frac": float(((1 - kept) * m).sum() / count),
        }
    corrected = correction_weights(
        args.correction, numerator, behaviour, mask, level=level, cap=cap, band=band
    )
    assert corrected is not None  # None only for correction none, returned above
    return corrected[0], {**metrics, **corrected[1]}


def rl_loss(
    micro: Batch,
    logprobs: Tensor,
    entropy: Tensor,
    args: PolicyUpdateArgs,
    norm_len: int,
    totals: Tensor,
) -> tuple[Tensor, dict[str, Metric]]:
    """This micro-batch's share of the mini-batch's loss, and its metrics weighted so that
    the trainer's means are the whole batch's (`loss_metrics.metric_weights`).

    `micro` holds `response_mask`, `advantages`, and where they apply `old_logprobs` (absent
    on-policy: this forward's, detached, are the old ones), `behaviour_logprobs` (the
    sampler's: topr's ratio is to them where they are), `ref_logprobs` (the KL term) and
    `action_mask` (agentic: the entropy bonus covers those tokens and `action_entropy`
    reports their mean). `logprobs` and `entropy` are the policy's `[B, R]` over the
    response tokens at `args.temperature`."""
    mask = micro[RESPONSE_MASK]
    agg_mask = aggregation_mask(args.policy_loss, mask, micro[ADVANTAGES])
    pg_share = micro_batch_share(args.loss_agg, agg_mask, totals[:3])
    old = micro[OLD_LOGPROBS] if OLD_LOGPROBS in micro else logprobs.detach()
    is_weights, off_metrics = off_policy_weights(args, old, micro, mask, logprobs)
    mu = micro.tensors.get(BEHAVIOUR_LOGPROBS)  # the sampler's, where the engine sent them
    inputs = PolicyLossInputs(
        logprobs=logprobs,
        advantages=micro[ADVANTAGES],
        mask=mask,
        old_logprobs=old,
        behaviour_logprobs=mu,
        is_weights=is_weights,
        clip_low=args.clip_low,
        clip_high=args.clip_high,
        dual_clip=args.dual_clip,
        agg=args.loss_agg,
        norm_len=norm_len,
    )
    loss, metrics = compute_policy_loss(args.policy_loss, inputs)
    loss = loss * pg_share
    ent = aggregate_loss(entropy, mask, "token-mean")
    metrics = {**metrics, "entropy": float(ent.detach()), **off_metrics}
    ent_mask, bonus = entropy_mask(micro), ent
    if ACTION_MASK in micro:  # weighted by its tokens: 0 here when it has none
        bonus = aggregate_loss(entropy, ent_mask, "token-mean")
        metrics["action_entropy"] = float(bonus.detach())
    if args.entropy_coef:
        ent_share = micro_batch_share("token-mean", ent_mask, totals[6:])
        loss = loss - args.entropy_coef * bonus * ent_share
    if REF_LOGPROBS in micro:
        # GRPO's objective (Shao et al. 2024, eq. 3) puts -beta KL_t inside the same
        # 1/|o_i| sum_t and 1/G sum_i as the policy term: the KL is aggregated like the
        # policy loss (`loss_agg`), over every response token of `mask`
        kl, kl_metrics = kl_loss(
            logprobs, micro[REF_LOGPROBS], mask, args.kl_estimator, args.loss_agg, norm_len
        )
        metrics["kl"] = kl_metrics["kl_mean"]
        if args.kl_loss_coef:
            kl_share = micro_batch_share(args.loss_agg, mask, totals[3:6])
            loss = loss + args.kl_loss_coef * kl * kl_share
    return loss, metric_weights(metrics, mask, agg_mask, ent_mask, pg_share)

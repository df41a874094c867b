"""From rewards to advantages: score shaping, normalisation, KL, the estimator.

Pipeline setup passes the recipe's `AlgorithmConfig`; this module turns it into flat
calls to the pure functions in `rollcli.algorithms`.
"""

from __future__ import annotations

import torch

from rollcli.algorithms.advantages import compute_advantages
from rollcli.algorithms.dapo import overlong_buffer_tokens, overlong_penalty, truncation_mask
from rollcli.algorithms.group import normalize_scores
from rollcli.algorithms.kl import AdaptiveKLController, FixedKLController, kl_estimate
from rollcli.algorithms.masked import masked_mean
from rollcli.algorithms.normalization import RunningMeanStd, clip_abs
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    ADVANTAGES,
    FINISHED,
    OLD_LOGPROBS,
    REF_LOGPROBS,
    RESPONSE_MASK,
    RETURNS,
    SCORES,
    VALUES,
)

STEP_ADVANTAGES = "step_advantages"  # a batch tensor `[B, T]` added to the advantages (GiGPO)


def make_kl_controller(alg: AlgorithmConfig) -> FixedKLController | AdaptiveKLController:
    """The recipe's KL coefficient schedule; the adaptive one compares `kl_target` with the
    mean KL per response token that `add_advantages` measures (both per token)."""
    if alg.kl_controller == "adaptive":
        return AdaptiveKLController(alg.kl_coef, alg.kl_target, alg.kl_horizon)
    return FixedKLController(alg.kl_coef)


def shape_scores(
    alg: AlgorithmConfig,
    scores: torch.Tensor,
    lengths: torch.Tensor,
    max_new_tokens: int,
    group_size: int,
    running: RunningMeanStd | None,
) -> torch.Tensor:
    """Reward clip → overlong penalty (DAPO) → normalisation (group / batch / running)."""
    scores = clip_abs(scores.float(), alg.reward_clip)
    if alg.overlong_buffer > 0:
        buffer = overlong_buffer_tokens(alg.overlong_buffer, max_new_tokens)
        scores = scores + overlong_penalty(lengths, max_new_tokens, buffer, alg.overlong_penalty)
    if alg.norm_mode == "running":
        assert running is not None
        return running.normalize(scores)
    return normalize_scores(scores, group_size, alg.norm_mode, alg.norm_std)


def add_advantages(
    alg: AlgorithmConfig,
    batch: Batch,
    *,
    group_size: int,
    max_new_tokens: int,
    kl_ctl: FixedKLController | AdaptiveKLController,
    running: RunningMeanStd | None,
) -> dict[str, float]:
    """Set `advantages` and `returns` on the batch; returns KL metrics.

    Groups are `group_size` contiguous rows. A `STEP_ADVANTAGES` tensor in the batch (the
    episode source's GiGPO step-level term) is taken out of it and added before whitening
    and clipping.

    With `alg.mask_truncated` (DAPO's overlong filtering) truncated samples leave the loss
    (their `response_mask` rows become 0, so their advantages are 0) but stay in their
    group's baseline with their full shaped score: the baseline estimates the expected
    score of what the policy samples, truncated answers included, and the overlong
    penalty reads their real lengths (the mask before filtering). Read after filtering,
    a truncated answer's length was 0: it lost its penalty (`-overlong_penalty`) and
    raised the group mean, which could flip a finished answer's advantage from + to -.
    """
    step_advantages = batch.tensors.pop(STEP_ADVANTAGES, None)
    mask = batch[RESPONSE_MASK]
    lengths = mask.sum(dim=1)  # real lengths, before mask_truncated empties any row
    if alg.mask_truncated:
        mask = mask * truncation_mask(batch[FINISHED]).unsqueeze(1)
        batch.set(RESPONSE_MASK, mask)
    scores = shape_scores(alg, batch[SCORES], lengths, max_new_tokens, group_size, running)
    metrics: dict[str, float] = {}
    kl = None
    if REF_LOGPROBS in batch and alg.kl_in_reward:
        kl = kl_estimate(batch[OLD_LOGPROBS], batch[REF_LOGPROBS], alg.kl_estimator)
        # the mean per response token: the unit of `algorithm.kl_target`
        current = float(masked_mean(kl, mask)) if mask.sum() > 0 else 0.0
        metrics["actor/kl_reward"] = current
        metrics["actor/kl_coef"] = kl_ctl.value
    use_kl_reward = kl is not None
    advantages, returns = compute_advantages(
        alg.advantage,
        mask=mask,
        scores=scores,
        values=batch.tensors.get(VALUES),
        kl=kl if use_kl_reward else None,
        kl_coef=kl_ctl.value if use_kl_reward else 0.0,
        group_size=group_size,
        gamma=alg.gamma,
        lam=alg.lam,
        norm_std=alg.norm_std,
        whiten=alg.whiten_advantages,
        advantage_clip=alg.advantage_clip,
        step_advantages=step_advantages,
    )
    batch.set(ADVANTAGES, advantages)
    batch.set(RETURNS, returns)
    if kl is not None:
        kl_ctl.update(metrics["actor/kl_reward"], len(batch))
    return metrics

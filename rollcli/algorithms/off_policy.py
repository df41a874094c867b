"""Corrections for rollouts sampled by a slightly different policy.

The inference engine (vLLM, SGLang) computes log-probs with other kernels, precision
or an older weight version (async rollout) than the trainer, so the sampler `mu` and the
trainer's `pi_old` differ. Truncated importance sampling (TIS; Yao et al. 2025, "Your
efficient RL framework secretly brings you off-policy RL training") reweights each
token by `pi_old / mu`, truncated so that rare tokens cannot explode the variance.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


@torch.no_grad()
def truncated_is_weights(
    old_logprobs: Tensor, behaviour_logprobs: Tensor, mask: Tensor, cap: float = 2.0
) -> Tensor:
    """Per-token TIS weights `[B, T]`: `w_t = min(exp(logp_old_t - logp_mu_t), cap)`.

    Detached, 0 at masked positions. Pass the result as `is_weights` to a policy loss.
    """
    if cap <= 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    log_w = (old_logprobs - behaviour_logprobs).clamp(max=math.log(cap))
    return log_w.exp().clamp(max=cap) * mask.to(log_w.dtype)

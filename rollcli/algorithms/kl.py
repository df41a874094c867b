"""KL penalties against the reference policy, and the controllers that set their weight.

The per-token estimators follow J. Schulman, "Approximating KL divergence" (2020,
http://joschu.net/blog/kl-approx.html). Tokens are sampled from the policy `pi`, and
`log r = logp_ref - logp` (`r = pi_ref / pi`). For `KL(pi || pi_ref)`:

| name | per token | properties |
| --- | --- | --- |
| `k1` | `-log r = logp - logp_ref` | unbiased, high variance, can be negative |
| `k2` | `1/2 (log r)^2` | biased (low for close policies), >= 0, low variance |
| `k3` | `(r - 1) - log r` | unbiased, >= 0, low variance ("low-var KL") |
| `abs` | `abs(log r)` | >= 0, a distance rather than an estimator |

`algorithm.kl_in: reward` subtracts `kl_coef * kl_t` from the token rewards
(InstructGPT, Ouyang et al. 2022); `kl_in: loss` adds `kl_coef * agg(kl)` to the loss
(GRPO, Shao et al. 2024), via `kl_loss`.
"""

from __future__ import annotations

import math

from torch import Tensor

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.masked import masked_mean

KL_ESTIMATORS: tuple[str, ...] = ("k1", "k2", "k3", "abs")
LOG_RATIO_LIMIT = 20.0


def kl_estimate(
    logprobs: Tensor, ref_logprobs: Tensor, estimator: str = "k3", clamp: float | None = 10.0
) -> Tensor:
    """Per-token estimate `[B, T]` of `KL(pi || pi_ref)` (see the module table).

    `log r` is clamped to `[-20, 20]` before `k3` exponentiates it, and `k3` is then
    clamped to `[-clamp, clamp]` (None = no clamp) so that a single token where the
    policies disagree wildly cannot dominate the batch. The result keeps the gradient
    through `logprobs` (for KL in the loss); detach it for KL in the reward.
    """
    log_r = ref_logprobs - logprobs
    if estimator == "k1":
        return -log_r
    if estimator == "k2":
        return 0.5 * log_r.square()
    if estimator == "abs":
        return log_r.abs()
    if estimator == "k3":
        log_r = log_r.clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
        kl = log_r.exp() - 1 - log_r
        return kl if clamp is None else kl.clamp(-clamp, clamp)
    raise ValueError(f"unknown KL estimator {estimator!r}; choose one of {KL_ESTIMATORS}")


def kl_loss(
    logprobs: Tensor,
    ref_logprobs: Tensor,
    mask: Tensor,
    estimator: str = "k3",
    agg: str = "token-mean",
    norm_len: float | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """KL term for the loss (`kl_in: loss`): `agg(kl_estimate(...))`, unweighted.

    The caller multiplies by the controller's `value`. Metrics: `kl_loss` (the
    aggregated term) and `kl_mean` (token mean of the estimate).
    """
    kl = kl_estimate(logprobs, ref_logprobs.detach(), estimator)
    m = mask.to(kl.dtype)
    loss = aggregate_loss(kl, m, agg, norm_len)
    return loss, {"kl_loss": float(loss.detach()), "kl_mean": float(masked_mean(kl.detach(), m))}


class FixedKLController:
    """A constant KL coefficient: `value` never changes."""

    def __init__(self, coef: float) -> None:
        if coef < 0:
            raise ValueError(f"KL coefficient must be >= 0, got {coef}")
        self.value = float(coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """No-op, kept so that both controllers are used the same way."""

    def state_dict(self) -> dict[str, float]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """Nothing to restore: the value is the recipe's (a resumed run that sets
        `algorithm.kl_coef=...` takes it; the checkpoint's copy is the old recipe's)."""


class AdaptiveKLController:
    """Adaptive KL coefficient (Ziegler et al. 2019, arXiv:1909.08593, section 2.2).

    After each step, with the measured KL and the number of samples `n_steps` it
    covered:

        e      = clip(current_kl / target - 1, -0.2, 0.2)
        value <- value * (1 + e * n_steps / horizon)

    The coefficient rises while the policy drifts beyond `target` nats, and falls
    while it stays closer. `current_kl` and `target` must be in one unit: the RL pipeline
    passes the mean KL per response token (`actor/kl_reward`), so `target` is per token
    (verl's default 0.1). Ziegler et al.'s and TRL's 6 nats are per sequence (the KL summed
    over a response): compared with a per-token mean, such a target is never reached and
    the coefficient only falls.

    >>> ctl = AdaptiveKLController(0.05, target=0.1, horizon=10000)
    >>> ctl.update(0.15, 64)  # above the target: e = 0.2, the coefficient rises
    >>> round(ctl.value, 6)
    0.050064
    """

    def __init__(self, init_coef: float, target: float, horizon: float) -> None:
        if init_coef < 0 or target <= 0 or horizon <= 0:
            raise ValueError(
                "adaptive KL needs init_coef >= 0, target > 0 and horizon > 0; got "
                f"{init_coef}, {target}, {horizon}"
            )
        self.value = float(init_coef)
        self.target = float(target)
        self.horizon = float(horizon)

    def update(self, current_kl: float, n_steps: int) -> None:
        if not math.isfinite(current_kl):
            return
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon

    def state_dict(self) -> dict[str, float]:
        return {"value": self.value, "target": self.target, "horizon": self.horizon}

    def load_state_dict(self, state: dict[str, float]) -> None:
        """The coefficient reached; `target` and `horizon` stay the recipe's, so a resume
        that sets them (`algorithm.kl_target=...`) takes effect."""
        self.value = float(state["value"])

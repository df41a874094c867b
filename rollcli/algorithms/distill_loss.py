"""Logit distillation: divergences between a teacher's and a student's next-token
distributions, `p = softmax(z_teacher / T)` and `q = softmax(z_student / T)`.

| name | per token | note |
| --- | --- | --- |
| `forward_kl` | `KL(p ‖ q) = sum p (log p - log q)` | mean-seeking; Hinton et al. 2015 |
| `reverse_kl` | `KL(q ‖ p) = sum q (log q - log p)` | mode-seeking; MiniLLM, Gu et al. 2024 |
| `js` | `1/2 KL(p ‖ m) + 1/2 KL(q ‖ m)`, `m = (p + q) / 2` | Jensen-Shannon; GKD, Agarwal et al. 2024 |
| `skew_forward_kl` | `KL(p ‖ a p + (1-a) q)` | DistiLLM, Ko et al. 2024 (`a` = `skew_alpha`) |
| `skew_reverse_kl` | `KL(q ‖ a q + (1-a) p)` | DistiLLM |

The loss is the token mean times `T^2`, so gradients keep their size across temperatures
(Hinton et al. 2015). Top-k transfer: the teacher sends only its `k` largest logits per
token; both distributions are then taken over those `k` tokens (`student_on_support`
picks the student's logits there) and renormalised.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from rollcli.algorithms.masked import masked_mean

DISTILL_LOSSES: tuple[str, ...] = (
    "forward_kl",
    "reverse_kl",
    "js",
    "skew_forward_kl",
    "skew_reverse_kl",
)


def _kl(log_a: Tensor, log_b: Tensor) -> Tensor:
    """`KL(a ‖ b)` over the last dimension, from log-probabilities."""
    return (log_a.exp() * (log_a - log_b)).sum(dim=-1)


def _log_mix(log_a: Tensor, log_b: Tensor, weight_a: float) -> Tensor:
    """`log(w a + (1 - w) b)`, computed in log space."""
    return torch.logaddexp(log_a + math.log(weight_a), log_b + math.log(1 - weight_a))


def token_divergence(
    student_logits: Tensor,
    teacher_logits: Tensor,
    kind: str = "forward_kl",
    *,
    temperature: float = 1.0,
    skew_alpha: float = 0.1,
) -> Tensor:
    """Divergence per position `[..., V] -> [...]` (formulas in the module docstring)."""
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"student logits {tuple(student_logits.shape)} and teacher logits "
            f"{tuple(teacher_logits.shape)} differ in shape"
        )
    log_q = torch.log_softmax(student_logits.float() / temperature, dim=-1)
    log_p = torch.log_softmax(teacher_logits.float() / temperature, dim=-1)
    if kind == "forward_kl":
        return _kl(log_p, log_q)
    if kind == "reverse_kl":
        return _kl(log_q, log_p)
    if kind == "js":
        log_m = _log_mix(log_p, log_q, 0.5)
        return 0.5 * _kl(log_p, log_m) + 0.5 * _kl(log_q, log_m)
    if kind == "skew_forward_kl":
        return _kl(log_p, _log_mix(log_p, log_q, skew_alpha))
    if kind == "skew_reverse_kl":
        return _kl(log_q, _log_mix(log_q, log_p, skew_alpha))
    raise ValueError(f"unknown distillation loss {kind!r}; choose one of {DISTILL_LOSSES}")


def student_on_support(student_logits: Tensor, teacher_ids: Tensor) -> Tensor:
    """The student's logits at the teacher's top-k token ids: `[..., V], [..., k] -> [..., k]`."""
    return student_logits.gather(-1, teacher_ids)


def distill_loss(
    student_logits: Tensor,
    teacher_logits: Tensor,
    mask: Tensor | None = None,
    *,
    kind: str = "forward_kl",
    temperature: float = 1.0,
    skew_alpha: float = 0.1,
) -> tuple[Tensor, dict[str, float]]:
    """`T^2` times the mean divergence over the positions where `mask` is 1 (all when None)."""
    div = token_divergence(
        student_logits, teacher_logits, kind, temperature=temperature, skew_alpha=skew_alpha
    )
    mask = torch.ones_like(div) if mask is None else mask
    loss = temperature**2 * masked_mean(div, mask)
    return loss, {"distill_loss": float(loss.detach())}

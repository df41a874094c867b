"""The hf engine's sampling: one token per row from the temperature / top-k / top-p warped
logits, and its log-prob under the temperature-only distribution (why: hf_infer.py's
docstring).

The warpers are built here from `SamplingParams` alone, so defaults in a model's
`generation_config.json` (e.g. top_k 50) never leak in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from rollcli.strategies.hf_infer import SamplingParams


def sampler(
    params: SamplingParams, offset: int, device: torch.device
) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A chunk's draw: `sample_tokens` with the chunk's generator (seeded `seed + offset`) and
    warpers (none at temperature 1 without top-k / top-p); greedy at temperature 0."""
    generator = torch.Generator(device=device).manual_seed(params.seed + offset)
    warped = build_warpers(params)
    temperature = params.temperature if params.temperature > 0 else 1.0
    chosen = generator if params.temperature > 0 else None
    return lambda logits: sample_tokens(logits, warped, chosen, temperature)


def sample_tokens(
    logits: torch.Tensor,
    warpers: list,
    generator: torch.Generator | None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row, drawn from the warped distribution (greedy without a
    `generator`), and its log-prob under `softmax(logits / temperature)`:

        log mu(y) = logits_y / T - logsumexp(logits / T)

    not under the top-k / top-p truncated one the token was drawn from (see the module
    docstring).

    Sampling inverts the CDF with one uniform per row (float64, so even the tail's
    probabilities are kept): the same categorical distribution as `torch.multinomial`, which
    draws an exponential per vocabulary entry (at batch 64 that cost more than the LM head's
    softmax). No full log-softmax is materialised: log p = score - max - log(sum exp).
    """
    scores = logits.float()
    for warp in warpers:
        scores = warp(None, scores)
    top = scores.amax(dim=-1, keepdim=True)
    weights = (scores - top).exp_()  # 0 where a warper masked the score to -inf
    tempered = logits.float() / temperature if temperature != 1.0 else logits.float()
    if not torch.isneginf(scores).any():  # no truncation: scores are the tempered logits
        tempered, tempered_top, tempered_weights = scores, top, weights
    else:
        tempered_top = tempered.amax(dim=-1, keepdim=True)
        tempered_weights = (tempered - tempered_top).exp_()
    if generator is None:
        tokens = scores.argmax(dim=-1)
    else:
        cdf = weights.double().cumsum_(dim=-1)
        total = cdf[:, -1:]
        u = torch.rand(total.shape, dtype=total.dtype, device=total.device, generator=generator)
        u = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
        tokens = torch.searchsorted(cdf, u, right=True).squeeze(1)  # first cdf > u: p > 0
    log_total = tempered_weights.sum(dim=-1, keepdim=True).log()
    picked = tempered.gather(1, tokens[:, None]) - tempered_top - log_total
    return tokens, picked.squeeze(1)


def build_warpers(params: SamplingParams) -> list:
    """Temperature, then top-k, then top-p (vLLM's order); none when greedy."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    if params.temperature <= 0:
        return []
    warpers: list = []
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k > 0:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    return warpers

"""A low-precision rollout's log-probs against a model's fp32 ones, per sampled token (the
int8 and bf16 rollout tests)."""

from __future__ import annotations

import torch

from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.sampling import SamplingParams

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6]]
SAMPLE = SamplingParams(n=4, max_new_tokens=16, temperature=1.0, seed=11)


def fp32_logprobs(model, gens) -> list[list[float]]:  # noqa: ANN001
    """`model`'s log-probs of each generation's tokens after its prompt (of `PROMPTS`)."""
    tensors = rollout_tensors(
        [PROMPTS[g.prompt_index] for g in gens], [g.token_ids for g in gens], 0
    )
    with torch.no_grad():
        lp, _ = response_logprobs(model, tensors, temperature=1.0)
    return [lp[i, : len(g.token_ids)].tolist() for i, g in enumerate(gens)]


def gaps(model, gens) -> torch.Tensor:  # noqa: ANN001
    """Each sampled token's engine log-prob less `model`'s."""
    ref = fp32_logprobs(model, gens)
    return torch.tensor(
        [a - b for g, r in zip(gens, ref, strict=True) for a, b in zip(g.logprobs, r, strict=True)]
    )

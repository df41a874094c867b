"""The LM head applied a chunk of positions at a time, so `[B, T, V]` logits never exist.

On a small model with a large vocabulary the logits are most of a training step's memory:
smollm2-135m's head has 49,152 outputs, so 8 rows of 2,048 tokens are 3.2 GB of fp32
logits, and autograd keeps the softmax of the entropy bonus and the logits' gradient next to
them. Here the decoder's hidden states (`[N, H]`, 576 floats per token) are the only
per-token tensor kept for the whole sequence; each chunk's logits are built, reduced to a
log-prob and an entropy per token, and dropped. Under autograd each chunk is checkpointed:
the backward pass rebuilds that chunk's logits from its hidden states (one more head
matmul per chunk) instead of storing them.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits

HEAD_CHUNK_TOKENS = 256  # positions per head call: 256 x 49,152 fp32 logits = 50 MB


def plain_head(model) -> torch.nn.Module | None:  # noqa: ANN001
    """The output projection when the logits are exactly `head(decoder(x))`, else None.

    None for heads that scale or cap their logits (the model must compute those) and for
    wrappers such as a DeepSpeed engine, whose forward must run as a whole. A peft (LoRA)
    model's head is its base model's: the adapters sit inside the decoder.
    """
    from peft import PeftModel
    from transformers import PreTrainedModel

    if isinstance(model, PeftModel):
        model = model.get_base_model()
    if not isinstance(model, PreTrainedModel):
        return None
    config = model.config
    if getattr(config, "final_logit_softcapping", None) is not None:
        return None
    if getattr(config, "logit_scale", None) is not None:
        return None
    return model.get_output_embeddings()


def head_logprobs(
    head: torch.nn.Module,
    hidden: torch.Tensor,
    labels: torch.Tensor,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    chunk_tokens: int = HEAD_CHUNK_TOKENS,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`log softmax(head(h) / temperature)[y]` (and the entropy) for `[N, H]` hidden states
    and `[N]` labels, as float32 `[N]` tensors; differentiable in `hidden` and the head."""
    recompute = torch.is_grad_enabled() and (
        hidden.requires_grad or any(p.requires_grad for p in head.parameters())
    )
    logprobs, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        args = (head, hidden[start : start + chunk_tokens], labels[start : start + chunk_tokens])
        if recompute:
            lp, ent = checkpoint(_chunk, *args, temperature, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk(*args, temperature, with_entropy)
        logprobs.append(lp)
        entropies.append(ent)
    if not logprobs:
        # no positions, but in the graph: a micro-batch of empty responses backpropagates
        empty = hidden[:, 0].float()
        return empty, (empty if with_entropy else None)
    return torch.cat(logprobs), (torch.cat(entropies) if with_entropy else None)


def _chunk(
    head: torch.nn.Module,
    hidden: torch.Tensor,
    labels: torch.Tensor,
    temperature: float,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = head(hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    n = logits.shape[0]
    logprobs = logprobs_from_logits(logits, labels, chunk_size=n)
    if not with_entropy:
        return logprobs, logprobs.new_zeros(0)
    return logprobs, entropy_from_logits(logits, chunk_size=n)

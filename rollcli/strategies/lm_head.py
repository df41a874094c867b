"""The LM head applied a chunk of positions at a time, so `[B, T, V]` logits never exist.

On a small model with a large vocabulary the logits are most of a training step's memory:
smollm2-135m's head has 49,152 outputs, so 8 rows of 2,048 tokens are 3.2 GB of fp32
logits, and autograd keeps the softmax of the entropy bonus and the logits' gradient next to
them. Here the decoder's hidden states (`[N, H]`, 576 floats per token) are the only
per-token tensor kept for the whole sequence; each chunk's logits are built, reduced to a
log-prob and an entropy per token, and dropped. Under autograd each chunk is checkpointed:
the backward pass rebuilds that chunk's logits from its hidden states (one more head
matmul per chunk) instead of storing them. For a plain `nn.Linear` head the chunk is one
autograd function (`_FusedHeadChunk`) with the softmax passes fused and the logits'
gradient written in place: on smollm2-135m's rlvr-math batch the head's elementwise work
fell from ~9 s to ~2 s of a 35 s forward+backward (`torch.profiler`, 2 threads).
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
    fused = type(head) is torch.nn.Linear  # else (e.g. an adapter on the head): autograd
    logprobs, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        args = (hidden[start : start + chunk_tokens], labels[start : start + chunk_tokens])
        if recompute and fused:
            lp, ent = _FusedHeadChunk.apply(
                *args, head.weight, head.bias, temperature, with_entropy
            )
        elif recompute:
            lp, ent = checkpoint(
                _chunk, head, *args, temperature, with_entropy, use_reentrant=False
            )
        elif fused:
            lp, ent, _ = _fused_forward(*args, head.weight, head.bias, temperature, with_entropy)
        else:
            lp, ent = _chunk(head, *args, temperature, with_entropy)
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


def _shifted_logits(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, temperature: float
) -> torch.Tensor:
    """`head(h) / temperature` in float32, a fresh tensor the caller may overwrite."""
    z = torch.nn.functional.linear(hidden, weight, bias).float()
    return z.div_(temperature) if temperature != 1.0 else z


def _fused_forward(
    hidden: torch.Tensor,
    labels: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    temperature: float,
    with_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """A chunk's log-probs and entropies in a few passes over its `[n, V]` logits:
    `z <- z - max z`, `e = exp z`, `log p_y = z_y - log sum e`,
    `H = log sum e - sum(e z) / sum e`. Returns what the backward needs too: the row's
    max, `log sum e` and `E_p[z]` (all of the shifted `z`)."""
    z = _shifted_logits(hidden, weight, bias, temperature)
    top = z.amax(dim=-1, keepdim=True)
    z.sub_(top)
    e = z.exp()
    log_total = e.sum(dim=-1, keepdim=True).log_()
    logprobs = (z.gather(-1, labels[:, None]) - log_total).squeeze(-1)
    if not with_entropy:
        return logprobs, logprobs.new_zeros(0), (top, log_total, None)
    mean_z = (e.mul_(z)).sum(dim=-1, keepdim=True).div_(log_total.exp())
    return logprobs, (log_total - mean_z).squeeze(-1), (top, log_total, mean_z)


class _FusedHeadChunk(torch.autograd.Function):
    """One chunk of the head with its log-prob and entropy, as `_chunk` computes them, with
    a hand-written backward: the logits are rebuilt from the saved hidden states (as the
    checkpoint did) and their gradient is formed in place, instead of replaying and
    differentiating the softmax, log-sum-exp and entropy passes one by one.

    With `p = softmax(z)`, `d log p_y / dz = onehot(y) - p` and
    `dH / dz = p * (E_p[z] - z)`; both are divided by the temperature."""

    @staticmethod
    def forward(ctx, hidden, labels, weight, bias, temperature, with_entropy):  # noqa: ANN001, ANN205
        logprobs, entropy, (top, log_total, mean_z) = _fused_forward(
            hidden, labels, weight, bias, temperature, with_entropy
        )
        ctx.save_for_backward(hidden, labels, weight, bias, top, log_total, mean_z)
        ctx.temperature = temperature
        ctx.set_materialize_grads(False)
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):  # noqa: ANN001, ANN205
        hidden, labels, weight, bias, top, log_total, mean_z = ctx.saved_tensors
        z = _shifted_logits(hidden, weight, bias, ctx.temperature).sub_(top)
        p = (z - log_total).exp_()
        grad = torch.zeros_like(p)
        if grad_entropy is not None and mean_z is not None:
            grad = z.neg_().add_(mean_z).mul_(p).mul_(grad_entropy[:, None])  # reuses z
        if grad_logprobs is not None:
            grad.sub_(p.mul_(grad_logprobs[:, None]))
            grad.scatter_add_(-1, labels[:, None], grad_logprobs[:, None].to(grad.dtype))
        if ctx.temperature != 1.0:
            grad.div_(ctx.temperature)
        grad = grad.to(weight.dtype)
        needs = ctx.needs_input_grad
        grad_hidden = grad @ weight if needs[0] else None
        grad_weight = grad.t() @ hidden if needs[2] else None
        grad_bias = grad.sum(0) if bias is not None and needs[3] else None
        return grad_hidden, None, grad_weight, grad_bias, None, None

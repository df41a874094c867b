"""The LM head applied a chunk of positions at a time, so `[B, T, V]` logits never exist.

On a small model with a large vocabulary the logits are most of a training step's memory:
smollm2-135m's head has 49,152 outputs, so 8 rows of 2,048 tokens are 3.2 GB of fp32
logits, and autograd keeps the softmax of the entropy bonus and the logits' gradient next to
them. Here the decoder's hidden states (`[N, H]`, 576 floats per token) are the only
per-token tensor kept for the whole sequence; each chunk's logits are built, reduced to a
log-prob and an entropy per token, and dropped. Under autograd each chunk is checkpointed:
the backward pass rebuilds that chunk's logits from its hidden states (one more head
matmul per chunk) instead of storing them. For a plain `nn.Linear` head all chunks are one
autograd function (`_FusedHead`) with the softmax passes fused, the logits' gradient
written in place and the head's weight gradient accumulated in one tensor: on
smollm2-135m's rlvr-math batch the head's elementwise work fell from ~9 s to ~2 s of a 35 s
forward+backward (`torch.profiler`, 2 threads). That tensor is the weight's `.grad` itself
(`_adds_in_place`): each micro-batch adds to it, and a tied input embedding's sparse rows
join it there, where autograd made a fresh `[V, H]` sum of the two per micro-batch (an
rlvr-math bf16-mixed update of 4 micro-batches: 7.3 -> 6.5 s in-process, 2 cores).

Fresh tensors of 50-113 MB (a chunk's logits, a chunk's `[V, H]` weight gradient) are above
glibc's mmap threshold: each is mapped, zero-filled a 4 KiB page at a time and unmapped
on every use; an rlvr-math training step made ~1M such page faults (5-11 s of kernel time,
`getrusage`). So on CPU a chunk's `[n, V]` float32 tensors go into scratch buffers kept
between calls (`_Scratch`), and the weight gradient is one buffer per backward.

When a training call's logits are small (`KEEP_LOGITS_BYTES`: rlvr-math's micro-batch of
16 responses is ~90 MB) they are computed in one matmul into a kept CPU buffer and the
backward reads them there instead of rebuilding them, and forms its two head matmuls over
all positions at once: 3 head matmuls per training micro-batch instead of 4, each over more
rows (a `[464, 576] x [576, 49152]` matmul runs ~20% faster per FLOP than 256-row chunks here).
"""

from __future__ import annotations

import threading
import weakref

import torch
from torch.utils.checkpoint import checkpoint

from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits

HEAD_CHUNK_TOKENS = 256  # positions per head call: 256 x 49,152 fp32 logits = 50 MB
KEEP_LOGITS_BYTES = 256 * 2**20  # a training call's logits up to this size are kept


def plain_head(model) -> torch.nn.Module | None:  # noqa: ANN001
    """The output projection when the logits are exactly `head(decoder(x))`, else None.

    None for heads that scale or cap their logits (the model must compute those) and for
    wrappers such as a DeepSpeed engine, whose forward must run as a whole; so must an
    FSDP2 model's (`fully_shard`): its root forward gathers the embeddings and the head,
    which stay sharded when the decoder is called alone. A peft (LoRA) model's head is its
    base model's: the adapters sit inside the decoder.
    """
    from peft import PeftModel
    from torch.distributed.fsdp import FSDPModule
    from transformers import PreTrainedModel

    if isinstance(model, FSDPModule):
        return None
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
    if hidden.shape[0] == 0:
        # no positions, but in the graph: a micro-batch of empty responses backpropagates
        empty = hidden[:, 0].float()
        return empty, (empty if with_entropy else None)
    if fused:
        args = (hidden, labels, head.weight, head.bias, temperature, with_entropy, chunk_tokens)
        if recompute:
            logprobs, entropy = _FusedHead.apply(*args)
        else:
            logprobs, entropy, _ = _FusedHead.forward_only(*args)
        return logprobs, (entropy if with_entropy else None)
    logprobs, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        args = (hidden[start : start + chunk_tokens], labels[start : start + chunk_tokens])
        if recompute:
            lp, ent = checkpoint(
                _chunk, head, *args, temperature, with_entropy, use_reentrant=False
            )
        else:
            lp, ent = _chunk(head, *args, temperature, with_entropy)
        logprobs.append(lp)
        entropies.append(ent)
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


class _Scratch(threading.local):
    """Float32 `[n, V]` buffers reused from chunk to chunk, one set per thread; slot 0
    holds the logits, slot 1 what is computed from them. Only on CPU (CUDA's caching
    allocator already reuses its blocks) and for float32 heads."""

    def __init__(self) -> None:
        self.buffers: dict[int, torch.Tensor] = {}
        self.lent: weakref.ref | None = None  # the last buffer `lend` gave out

    def get(self, slot: int, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor | None:
        """Rows `[:rows]` of slot `slot`'s `[>= rows, cols]` buffer; None off CPU float32."""
        if like.device.type != "cpu" or like.dtype != torch.float32:
            return None
        buffer = self.buffers.get(slot)
        if buffer is None or buffer.shape[0] < rows or buffer.shape[1] != cols:
            buffer = self.buffers[slot] = torch.empty(max(rows, HEAD_CHUNK_TOKENS), cols)
        return buffer[:rows]

    def lend(self, rows: int, cols: int, like: torch.Tensor) -> torch.Tensor | None:
        """A `[rows, cols]` float32 buffer (slot "kept") that stays the caller's while the
        returned tensor lives (a forward keeps its logits in it until its backward); None
        off CPU float32, above `KEEP_LOGITS_BYTES`, or while the last one lent is alive."""
        if rows * cols * 4 > KEEP_LOGITS_BYTES or (self.lent and self.lent() is not None):
            return None
        view = self.get(2, rows, cols, like)
        if view is not None:
            self.lent = weakref.ref(view)
        return view


_scratch = _Scratch()


def _like(slot: int, z: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor shaped like the logits `z`: a scratch buffer on CPU."""
    buffer = _scratch.get(slot, *z.shape, z) if z.is_contiguous() else None
    return torch.empty_like(z) if buffer is None else buffer


def _shifted_logits(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    temperature: float,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """`head(h) / temperature` in float32, written into `out` when given, else into a tensor
    the caller may overwrite until the next chunk (on CPU it is scratch slot 0)."""
    same = hidden.dtype == weight.dtype
    if out is None and same:
        out = _scratch.get(0, hidden.shape[0], weight.shape[0], weight)
    if out is None:
        z = torch.nn.functional.linear(hidden, weight, bias).float()
    else:
        z = torch.mm(hidden, weight.t(), out=out)
        if bias is not None:
            z.add_(bias)
    return z.div_(temperature) if temperature != 1.0 else z


def _softmax_stats(
    z: torch.Tensor, labels: torch.Tensor, with_entropy: bool
) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, ...]]:
    """A chunk's log-probs and entropies in a few passes over its `[n, V]` logits `z`:
    `z <- z - max z` (in place), `e = exp z`, `log p_y = z_y - log sum e`,
    `H = log sum e - sum(e z) / sum e`. Returns what the backward needs too: the row's
    max, `log sum e` and `E_p[z]` (all of the shifted `z`)."""
    top = z.amax(dim=-1, keepdim=True)
    z.sub_(top)
    e = torch.exp(z, out=_like(1, z))
    log_total = e.sum(dim=-1, keepdim=True).log_()
    logprobs = (z.gather(-1, labels[:, None]) - log_total).squeeze(-1)
    if not with_entropy:
        return logprobs, logprobs.new_zeros(0), (top, log_total, None)
    mean_z = (e.mul_(z)).sum(dim=-1, keepdim=True).div_(log_total.exp())
    return logprobs, (log_total - mean_z).squeeze(-1), (top, log_total, mean_z)


class _FusedHead(torch.autograd.Function):
    """The head over all positions, a chunk at a time, with each chunk's log-prob and
    entropy as `_chunk` computes them, and a hand-written backward: each chunk's logits are
    rebuilt from the saved hidden states (as a checkpoint would) and their gradient formed
    in place, instead of replaying and differentiating the softmax, log-sum-exp and entropy
    passes one by one. The head's weight gradient is accumulated over the chunks into one
    tensor (`addmm_`), not one `[V, H]` tensor per chunk summed by autograd.

    With `p = softmax(z)`, `d log p_y / dz = onehot(y) - p` and
    `dH / dz = p * (E_p[z] - z)`; both are divided by the temperature."""

    @staticmethod
    def forward_only(hidden, labels, weight, bias, temperature, with_entropy, chunk_tokens):  # noqa: ANN001, ANN205
        """The log-probs and entropies, and per position what the backward needs: the
        logits' max, `log sum exp` and `E_p[z]` (of the shifted logits)."""
        return _FusedHead._forward(
            hidden, labels, weight, bias, temperature, with_entropy, chunk_tokens, None
        )

    @staticmethod
    def _forward(hidden, labels, weight, bias, temperature, with_entropy, chunk_tokens, kept):  # noqa: ANN001, ANN205
        """`forward_only`; with `kept` (an `[N, V]` buffer) the logits of all positions are
        one matmul into it and stay there, shifted by each row's max."""
        if kept is not None:
            _shifted_logits(hidden, weight, bias, temperature, out=kept)
        parts = []
        for start in range(0, hidden.shape[0], chunk_tokens):
            part = slice(start, start + chunk_tokens)
            if kept is None:
                z = _shifted_logits(hidden[part], weight, bias, temperature)
            else:
                z = kept[part]
            parts.append(_softmax_stats(z, labels[part], with_entropy))
        logprobs = torch.cat([lp for lp, _, _ in parts])
        entropy = torch.cat([ent for _, ent, _ in parts])
        top, log_total = (torch.cat([saved[i] for _, _, saved in parts]) for i in (0, 1))
        mean_z = torch.cat([saved[2] for _, _, saved in parts]) if with_entropy else None
        return logprobs, entropy, (top, log_total, mean_z)

    @staticmethod
    def forward(ctx, hidden, labels, weight, bias, temperature, with_entropy, chunk_tokens):  # noqa: ANN001, ANN205
        same = hidden.dtype == weight.dtype
        kept = _scratch.lend(hidden.shape[0], weight.shape[0], weight) if same else None
        logprobs, entropy, (top, log_total, mean_z) = _FusedHead._forward(
            hidden, labels, weight, bias, temperature, with_entropy, chunk_tokens, kept
        )
        ctx.save_for_backward(hidden, labels, weight, bias, top, log_total, mean_z)
        ctx.kept = kept
        ctx.temperature = temperature
        ctx.chunk_tokens = chunk_tokens
        ctx.set_materialize_grads(False)
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):  # noqa: ANN001, ANN205
        hidden, labels, weight, bias, top, log_total, mean_z = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_hidden = torch.empty_like(hidden) if needs[0] else None
        kept, ctx.kept = ctx.kept, None  # used up: a second backward rebuilds the logits
        in_place = needs[2] and _adds_in_place(weight)  # into weight.grad, not returned
        if in_place and weight.grad is not None and weight.grad.is_sparse:
            weight.grad = weight.grad.to_dense()
        grad_weight = None
        if needs[2] and kept is None:
            if in_place and weight.grad is None:
                weight.grad = torch.zeros_like(weight)
            grad_weight = weight.grad if in_place else torch.zeros_like(weight)
        grad_bias = torch.zeros_like(bias) if bias is not None and needs[3] else None
        if grad_entropy is None or mean_z is None:
            grad_entropy = None
        for start in range(0, hidden.shape[0], ctx.chunk_tokens):
            part = slice(start, start + ctx.chunk_tokens)
            h = hidden[part]
            if kept is None:
                z = _shifted_logits(h, weight, bias, ctx.temperature).sub_(top[part])
            else:
                z = kept[part]
            p = torch.sub(z, log_total[part], out=_like(1, z)).exp_()
            if grad_entropy is not None:  # reuses z
                grad = z.neg_().add_(mean_z[part]).mul_(p).mul_(grad_entropy[part, None])
            else:
                grad = z.zero_()
            if grad_logprobs is not None:
                g = grad_logprobs[part, None]
                grad.sub_(p.mul_(g))
                grad.scatter_add_(-1, labels[part, None], g.to(grad.dtype))
            if ctx.temperature != 1.0:
                grad.div_(ctx.temperature)
            if kept is not None:  # the head's matmuls over all positions, below
                continue
            grad = grad.to(weight.dtype)
            if grad_hidden is not None:
                torch.mm(grad, weight, out=grad_hidden[part])
            if grad_weight is not None:
                grad_weight.addmm_(grad.t(), h)
            if grad_bias is not None:
                grad_bias.add_(grad.sum(0))
        if kept is not None:  # now the logits' gradient
            if grad_hidden is not None:
                torch.mm(kept, weight, out=grad_hidden)
            if in_place and weight.grad is not None:
                weight.grad.addmm_(kept.t(), hidden)
            elif needs[2]:
                grad_weight = torch.mm(kept.t(), hidden)
            if grad_bias is not None:
                grad_bias.add_(kept.sum(0))
        if in_place:
            if weight.grad is None:  # the step's first micro-batch: its product is .grad
                weight.grad = grad_weight
            grad_weight = None
        return grad_hidden, None, grad_weight, grad_bias, None, None, None


def _adds_in_place(weight: torch.Tensor) -> bool:
    """Whether the head's backward adds its weight gradient to `weight.grad` itself rather
    than returning it: for a plain leaf weight (no hooks: DeepSpeed and FSDP2 never reach
    this head, `plain_head`) outside a double backward. Autograd would sum the returned
    `[V, H]` tensor into `.grad`, and with a tied input embedding it first adds the
    embedding's sparse rows to it out of place: a fresh 113 MB tensor per micro-batch
    (smollm2-135m), ~0.14 s each on 2 cores, and the head's matmul into a fresh output.
    In place, each micro-batch's head gradient is one `addmm_` into `.grad` and the
    embedding's rows are added to it there."""
    return (
        weight.is_leaf
        and weight.requires_grad
        and not torch.is_grad_enabled()
        and not weight._backward_hooks
        and not getattr(weight, "_post_accumulate_grad_hooks", None)
    )

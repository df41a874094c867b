"""Log-probabilities and entropy from logits, without a full `[B, T, V]` softmax copy.

Both functions work through the flattened `[B*T, V]` logits `chunk_size` rows at a time
in float32, so peak extra memory is `chunk_size * V` floats instead of `B * T * V`
(which is gigabytes for a 150k vocabulary), and bf16 logits are not summed in bf16.
"""

from __future__ import annotations

import torch
from torch import Tensor

DEFAULT_CHUNK = 1024


def logprobs_from_logits(logits: Tensor, labels: Tensor, chunk_size: int = DEFAULT_CHUNK) -> Tensor:
    """`log softmax(z)[y] = z_y - logsumexp(z)` per position: `[B, T, V], [B, T] -> [B, T]`.

    `logits[:, t]` must already be the prediction for `labels[:, t]` (shift before).
    Differentiable with respect to `logits`.
    """
    if logits.shape[:-1] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not match labels {tuple(labels.shape)}")
    flat = logits.reshape(-1, logits.shape[-1])
    flat_labels = labels.reshape(-1)
    pieces = []
    for start in range(0, flat.shape[0], chunk_size):
        rows = flat[start : start + chunk_size].float()
        picked = rows.gather(-1, flat_labels[start : start + chunk_size, None]).squeeze(-1)
        pieces.append(picked - torch.logsumexp(rows, dim=-1))
    out = torch.cat(pieces) if pieces else flat[:, 0].float()  # empty, in the graph
    return out.reshape(labels.shape)


def entropy_from_logits(logits: Tensor, chunk_size: int = DEFAULT_CHUNK) -> Tensor:
    """Entropy of `softmax(z)` per position: `[B, T, V] -> [B, T]`.

        H = -sum_v p_v log p_v = logsumexp(z) - sum_v p_v z_v,   p = softmax(z)

    Stable for large logits: computed on `z - max(z)`, with no `log` of a tiny probability. Differentiable, so it can
    serve as the entropy bonus (`algorithm.entropy_coef`).
    """
    flat = logits.reshape(-1, logits.shape[-1])
    pieces = []
    for start in range(0, flat.shape[0], chunk_size):
        rows = flat[start : start + chunk_size].float()
        # H is shift-invariant; centring on the max avoids cancelling two large numbers.
        rows = rows - rows.amax(dim=-1, keepdim=True).detach()
        probs = torch.softmax(rows, dim=-1)
        pieces.append(torch.logsumexp(rows, dim=-1) - (probs * rows).sum(dim=-1))
    out = torch.cat(pieces) if pieces else flat[:, 0].float()  # empty, in the graph
    return out.reshape(logits.shape[:-1])

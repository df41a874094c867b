"""Attention masks built once per forward, in the form every layer reads as it is.

torch's `scaled_dot_product_attention` turns a bool mask into a float one inside every
call, and autograd keeps each layer's copy for the backward: 4·L² bytes a row and a layer.
A 4,016-token packed row of smollm2-135m kept 62 MiB × 30 layers that way, and two padded
webshop conversations of 2,048 tokens 1 GB. One additive mask in the model's dtype (0 where
allowed, the dtype's minimum elsewhere) is built once and every layer saves the same tensor.
Transformers passes a 4-D mask to `sdpa`, roll's CPU `sdpa_gqa` and `eager` as it is.
"""

from __future__ import annotations

import torch

from rollcli.strategies.hf_gqa_attention import FOLDED
from rollcli.strategies.hf_gqa_attention import NAME as SDPA_GQA

MASKED_ATTENTION = ("sdpa", SDPA_GQA, FOLDED, "eager")


def hf_module(model) -> torch.nn.Module:  # noqa: ANN001
    """The Hugging Face module behind a DeepSpeed engine (or the model itself)."""
    return getattr(model, "module", model)


def attention_implementation(model) -> str | None:  # noqa: ANN001
    return getattr(hf_module(model).config, "_attn_implementation", None)


def additive_mask(model, allowed: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    """`allowed` (`[B, 1, L, L]` bool) as an additive mask in `model`'s dtype."""
    dtype = hf_module(model).get_input_embeddings().weight.dtype
    additive = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return additive.masked_fill_(~allowed, torch.finfo(dtype).min)


def padded_rows_mask(model, attention_mask: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
    """The mask to hand a forward over padded rows: the 2-D padding mask itself where no row
    is padded (transformers then runs plain causal attention) or the model reads no 4-D
    mask, else causal attention to the real keys as one additive 4-D mask. A padding query
    sees only itself, so no row of the mask is empty."""
    if bool(attention_mask.all()) or attention_implementation(model) not in MASKED_ATTENTION:
        return attention_mask
    length = attention_mask.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=attention_mask.device).tril()
    keys = attention_mask.bool()[:, None, None, :]
    itself = torch.eye(length, dtype=torch.bool, device=attention_mask.device)
    return additive_mask(model, (causal & keys) | itself)

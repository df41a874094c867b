"""Grouped-query attention without copies of the key/value heads, for the hf engine on CPU
(`sdpa_gqa`) and for its decode steps on a GPU (`sdpa_folded`).

Transformers' `sdpa` attention repeats each key/value head for its query heads
(`repeat_kv`, a full copy of the layer's cache) whenever an attention mask is passed, which
the hf engine always does (left padding). On CPU, `scaled_dot_product_attention(...,
enable_gqa=True)` reads the grouped heads in place with a mask as well; at batch 64 the
copies were a third of a SmolLM2-135M decode step. Same numbers, registered under its own
name (`sdpa_gqa`) with sdpa's mask, and chosen by `use_gqa_attention` for a CPU model.
CUDA's fused kernels take no mask with `enable_gqa`, so on a GPU a decode step (one query
position) hands each key/value head's query heads to the kernel as positions of that head
instead (`folded_decode_attention`, chosen by the engine's CUDA-graph decode).
"""

from __future__ import annotations

import torch

NAME = "sdpa_gqa"


def sdpa_gqa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Transformers' attention-function signature; `[B, heads, T, D]` in, `[B, T, heads, D]`
    out, as `sdpa_attention_forward` (causal only for a prefill without a mask)."""
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=query.shape[2] > 1 and attention_mask is None and causal,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return out.transpose(1, 2).contiguous(), None


def use_gqa_attention(model: torch.nn.Module) -> None:
    """Switch a CPU model that uses `sdpa` to `sdpa_gqa` (elsewhere, or with another
    attention, it is left as it is: CUDA's fused kernels take no mask with grouped heads)."""
    _replace_sdpa(model, "cpu", NAME, sdpa_gqa_attention)


def _replace_sdpa(model: torch.nn.Module, device_type: str, name: str, attention) -> None:  # noqa: ANN001
    """Register `attention` as `name` (with sdpa's masks) and switch `model` to it, where the
    model uses `sdpa` and sits on `device_type`; else leave it as it is."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return
    if next(model.parameters()).device.type != device_type:
        return
    AttentionInterface.register(name, attention)
    AttentionMaskInterface.register(name, sdpa_mask)
    model.set_attn_implementation(name)


FOLDED = "sdpa_folded"


def folded_decode_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """Transformers' `sdpa`, except for a decode step with a mask over grouped heads: there
    each key/value head's `g` query heads are handed to `scaled_dot_product_attention` as `g`
    query positions of that head (`[B, kv_heads, g, D]`; the `[B, 1, 1, L]` mask broadcasts
    over them), so the heads are never copied. `sdpa` copies them (`repeat_kv`) whenever a
    mask is passed: at qwen2.5-0.5b's batch 256 with 512 positions, 0.47 GB a layer and a
    step, 24 layers, written and read again."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    b, heads, q_len, d = query.shape
    kv_heads = key.shape[1]
    if q_len != 1 or heads == kv_heads or attention_mask is None or dropout:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout, scaling, is_causal, **kwargs
        )
    folded = query.reshape(b, kv_heads, heads // kv_heads, d)  # head h reads kv head h // g
    out = torch.nn.functional.scaled_dot_product_attention(
        folded, key, value, attn_mask=attention_mask, scale=scaling
    )
    return out.reshape(b, heads, 1, d).transpose(1, 2).contiguous(), None


def use_folded_decode_attention(model: torch.nn.Module) -> None:
    """Switch a CUDA model that uses `sdpa` to `sdpa_folded` (the hf engine's decode on a GPU;
    every other call runs transformers' `sdpa` as before)."""
    _replace_sdpa(model, "cuda", FOLDED, folded_decode_attention)

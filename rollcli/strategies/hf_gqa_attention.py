"""Grouped-query attention without copies of the key/value heads, for the hf engine on CPU.

Transformers' `sdpa` attention repeats each key/value head for its query heads
(`repeat_kv`, a full copy of the layer's cache) whenever an attention mask is passed, which
the hf engine always does (left padding). On CPU, `scaled_dot_product_attention(...,
enable_gqa=True)` reads the grouped heads in place with a mask as well; at batch 64 the
copies were a third of a SmolLM2-135M decode step. Same numbers, registered under its own
name (`sdpa_gqa`) with sdpa's mask, and chosen by `use_gqa_attention` for a CPU model.
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
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return
    if next(model.parameters()).device.type != "cpu":
        return
    AttentionInterface.register(NAME, sdpa_gqa_attention)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    model.set_attn_implementation(NAME)

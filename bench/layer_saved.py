"""What one transformers llama decoder layer saves for backward on the CPU, per token.

    .venv/bin/python bench/layer_saved.py        # smollm2-135m's shapes, sdpa attention

Counts the bytes of every tensor autograd saves (`torch.autograd.graph.saved_tensors_hooks`,
each storage once) in a forward of a random model with 2 and with 3 layers; the difference
is one layer, and dividing by the tokens at two lengths separates what grows with the tokens
from the layer's weights (which autograd saves too). The planner's CPU figure
(`rollcli.planning.memory.layer_activation_bytes(counted=True)`) is 5h + 3q + 2kv + 4I
elements a token; this printed 11,147 against its 11,136 (torch 2.13, transformers as
pinned), where the GPU stand-in 4h + 2q + 2kv + 3I gives 8,448.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rollcli.models.registry import MODELS


def saved_bytes(layers: int, rows: int, tokens: int) -> int:
    s = MODELS["smollm2-135m"]
    cfg = LlamaConfig(
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=layers,
        num_attention_heads=s.num_attention_heads,
        num_key_value_heads=s.num_kv_heads,
        head_dim=s.head_dim,
        vocab_size=1000,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(cfg).train()
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    ids = torch.randint(0, 1000, (rows, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=ids, attention_mask=torch.ones(rows, tokens, dtype=torch.long))
    return sum(seen.values())


def main() -> None:
    rows = 4
    per_layer = {t: saved_bytes(3, rows, t) - saved_bytes(2, rows, t) for t in (256, 1024)}
    # per_layer(T) = weights + rows*T*per_token  ->  solve for per_token
    a, b = per_layer[256], per_layer[1024]
    per_token = (b - a) / (rows * (1024 - 256))
    s = MODELS["smollm2-135m"]
    h, i = s.hidden_size, s.intermediate_size
    q, kv = s.num_attention_heads * s.head_dim, s.num_kv_heads * s.head_dim
    print(f"saved per token per layer: {per_token / 4:,.0f} fp32 elements")
    print(f"planner, counted (5h + 3q + 2kv + 4I): {5 * h + 3 * q + 2 * kv + 4 * i:,}")
    print(f"GPU stand-in (4h + 2q + 2kv + 3I):     {4 * h + 2 * q + 2 * kv + 3 * i:,}")


if __name__ == "__main__":
    main()

"""`ModelSpec`: the architecture numbers of a model, used by planning and loading."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hf_id: str
    source: str  # "embedded" | "random" | "hub"
    architecture: str  # transformers model_type, e.g. "llama", "qwen2", "qwen3_moe"
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    # Mixture of experts (0 experts = dense).
    num_experts: int = 0
    num_experts_per_token: int = 0
    moe_intermediate_size: int = 0
    description: str = ""


def param_count(spec: ModelSpec) -> int:
    """Parameters of a llama/qwen-style decoder (embeddings, attention, MLP or MoE, norms)."""
    h = spec.hidden_size
    norms = 2 * h
    embed = spec.vocab_size * h * (1 if spec.tie_word_embeddings else 2)
    return decoder_linear_params(spec) + spec.num_layers * norms + embed + h


def decoder_linear_params(spec: ModelSpec) -> int:
    """The weights of the decoder layers' linear projections (attention, MLP or MoE experts
    and router): every parameter but the embeddings, an untied LM head and the norms."""
    h = spec.hidden_size
    attn = (
        h * spec.num_attention_heads * spec.head_dim * 2 + h * spec.num_kv_heads * spec.head_dim * 2
    )
    if spec.num_experts:
        mlp = spec.num_experts * 3 * h * spec.moe_intermediate_size + h * spec.num_experts
    else:
        mlp = 3 * h * spec.intermediate_size
    return spec.num_layers * (attn + mlp)

"""`ModelSpec`: the architecture numbers of a model, used by planning and loading."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    hf_id: str
    source: str  # "embedded" | "upcycled" | "random" | "hub" | "local" (registry.py)
    architecture: str  # transformers model_type, e.g. "llama", "qwen2", "qwen3_moe"
    num_layers: int
    hidden_size: int
    intermediate_size: int  # a dense MLP's width (an MoE model's dense layers)
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int
    # Mixture of experts (0 experts = dense).
    num_experts: int = 0
    num_experts_per_token: int = 0
    moe_intermediate_size: int = 0  # one routed expert's width
    # Layers of an MoE model whose MLP is dense (qwen's `mlp_only_layers` and
    # `decoder_sparse_step`); the others are sparse.
    num_dense_layers: int = 0
    # A shared expert every token runs besides its routed ones, scaled by a 1-output
    # sigmoid gate (Qwen2-MoE's `shared_expert_intermediate_size`); 0 = none.
    shared_expert_intermediate_size: int = 0
    description: str = ""


def param_count(spec: ModelSpec) -> int:
    """Parameters of a llama/qwen-style decoder (embeddings, attention, MLP or MoE, norms).

    Attention biases (qwen2's q/k/v) and per-head q/k norms (qwen3's) are left out."""
    return _count(spec, active=False)


def active_param_count(spec: ModelSpec) -> int:
    """Parameters one token's forward uses: `param_count` with only `num_experts_per_token`
    routed experts of each sparse layer (the router, the shared expert and the embeddings
    counted in full), the convention of model cards (Qwen3-30B-A3B: 3.3B activated).
    A dense model's is its `param_count`."""
    return _count(spec, active=True)


def _count(spec: ModelSpec, *, active: bool) -> int:
    h = spec.hidden_size
    norms = 2 * h
    embed = spec.vocab_size * h * (1 if spec.tie_word_embeddings else 2)
    return (
        spec.num_layers * (_attention_params(spec) + norms)
        + mlp_params(spec, active=active)
        + embed
        + h
    )


def decoder_linear_params(spec: ModelSpec) -> int:
    """The weights of the decoder layers' linear projections (attention, MLP or MoE experts
    and router): every parameter but the embeddings, an untied LM head and the norms."""
    return spec.num_layers * _attention_params(spec) + mlp_params(spec, active=False)


def _attention_params(spec: ModelSpec) -> int:
    h, q = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    return 2 * h * q + 2 * h * spec.num_kv_heads * spec.head_dim


def mlp_params(spec: ModelSpec, *, active: bool) -> int:
    """The MLP weights of all decoder layers: a dense layer's gate, up and down
    projections (3·h·I); a sparse layer's E experts of width I_e, its router (h·E) and a
    shared expert of width I_s with its gate (3·h·I_s + h). `active`: only the k experts a
    token is routed to.

    >>> from rollcli.models.registry import MODELS
    >>> spec = MODELS["qwen3-30b-a3b"]
    >>> mlp_params(spec, active=True) == 48 * (8 * 3 * 2048 * 768 + 2048 * 128)
    True
    """
    h = spec.hidden_size
    dense = 3 * h * spec.intermediate_size
    if not spec.num_experts:
        return spec.num_layers * dense
    experts = spec.num_experts_per_token if active else spec.num_experts
    sparse = experts * 3 * h * spec.moe_intermediate_size + h * spec.num_experts
    if spec.shared_expert_intermediate_size:
        sparse += 3 * h * spec.shared_expert_intermediate_size + h
    sparse_layers = spec.num_layers - spec.num_dense_layers
    return spec.num_dense_layers * dense + sparse_layers * sparse

"""How many parameters LoRA adapters add to a model (from its registry shapes)."""

from __future__ import annotations

from rollcli.models.registry import ModelSpec

# The linear layers of a llama/qwen decoder layer LoRA can adapt: name -> (in, out) features.
LORA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _linear_shapes(spec: ModelSpec) -> dict[str, tuple[int, int, int]]:
    """name -> (in, out, copies per layer); an MoE layer's MLP linears are per expert."""
    h, q = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    inter, copies = spec.intermediate_size, 1
    if spec.num_experts:
        inter, copies = spec.moe_intermediate_size, spec.num_experts
    return {
        "q_proj": (h, q, 1),
        "k_proj": (h, kv, 1),
        "v_proj": (h, kv, 1),
        "o_proj": (q, h, 1),
        "gate_proj": (h, inter, copies),
        "up_proj": (h, inter, copies),
        "down_proj": (inter, h, copies),
    }


def lora_param_count(spec: ModelSpec, *, r: int, target_modules: tuple[str, ...] | str) -> int:
    """Adapter parameters: `r · (in + out)` per adapted linear (A is r×in, B is out×r).

    `all-linear` adapts every linear of the decoder layers (not the LM head).

    >>> from rollcli.models.registry import MODELS
    >>> lora_param_count(MODELS["qwen2.5-7b"], r=16, target_modules=("q_proj", "v_proj"))
    5046272
    """
    shapes = _linear_shapes(spec)
    names = LORA_LINEARS if target_modules == "all-linear" else tuple(target_modules)
    unknown = [n for n in names if n not in shapes]
    if unknown:
        raise ValueError(
            f"cannot plan LoRA on {unknown[0]!r}: the planner knows {', '.join(LORA_LINEARS)} "
            "(or all-linear)"
        )
    per_layer = sum(r * (shapes[n][0] + shapes[n][1]) * shapes[n][2] for n in names)
    return spec.num_layers * per_layer

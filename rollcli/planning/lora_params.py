"""How many parameters LoRA adapters add to a model (from its registry shapes)."""

from __future__ import annotations

from rollcli.models.registry import ModelSpec

# The linear layers of a llama/qwen decoder layer LoRA can adapt: name -> (in, out) features.
LORA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
MLP_LINEARS = LORA_LINEARS[4:]  # an MoE layer has them per expert, fused: no linears


def _linear_shapes(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    """name -> (in, out) of a decoder layer's linears (a dense model's MLP included)."""
    h, q = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    inter = spec.intermediate_size
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, inter),
        "up_proj": (h, inter),
        "down_proj": (inter, h),
    }


def expert_adapter_params(spec: ModelSpec, *, r: int) -> int:
    """An MoE layer's expert adapters (strategies/lora.py adapts the experts' 3-D weights
    through peft's `target_parameters`, whatever `target_modules` says): a rank-r adapter
    per expert on `gate_up_proj` (in h, out 2I) and on `down_proj` (in I, out h); 0 for a
    dense model.

    >>> from rollcli.models.registry import MODELS
    >>> expert_adapter_params(MODELS["tiny-random-moe"], r=4)  # 2 layers, 4 experts
    14336
    """
    h, inter = spec.hidden_size, spec.moe_intermediate_size  # 0 experts: 0
    per_layer = r * spec.num_experts * ((h + 2 * inter) + (inter + h))
    return spec.num_layers * per_layer


def lora_param_count(spec: ModelSpec, *, r: int, target_modules: tuple[str, ...] | str) -> int:
    """Adapter parameters: `r · (in + out)` per adapted linear (A is r×in, B is out×r).

    `all-linear` adapts every linear of the decoder layers (not the LM head). An MoE
    model's experts are no linears (transformers 5 keeps them as 3-D parameters): the MLP
    names are not counted there, its expert adapters are (`expert_adapter_params`).

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
    if spec.num_experts:
        names = tuple(n for n in names if n not in MLP_LINEARS)
    per_layer = sum(r * (shapes[n][0] + shapes[n][1]) for n in names)
    return spec.num_layers * per_layer + expert_adapter_params(spec, r=r)

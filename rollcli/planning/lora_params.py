"""How many parameters LoRA adapters add to a model (from its registry shapes)."""

from __future__ import annotations

from rollcli.models.registry import ModelSpec

# The linear layers of a llama/qwen decoder layer LoRA can adapt: name -> (in, out) features.
LORA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def _linear_shapes(spec: ModelSpec) -> dict[str, list[tuple[int, int, int]]]:
    """name -> [(in, out, copies in the whole model)]: one per layer for attention; an MLP
    linear once per dense layer, and once per sparse layer for a shared expert (an MoE
    layer's routed experts are no linears: `expert_adapter_params`)."""
    h, q = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    layers = spec.num_layers
    widths = [(spec.intermediate_size, layers)]  # (MLP width, copies)
    if spec.num_experts:
        sparse = layers - spec.num_dense_layers
        widths = [
            (spec.intermediate_size, spec.num_dense_layers),
            (spec.shared_expert_intermediate_size, sparse),
        ]
    widths = [(w, n) for w, n in widths if w and n]
    return {
        "q_proj": [(h, q, layers)],
        "k_proj": [(h, kv, layers)],
        "v_proj": [(h, kv, layers)],
        "o_proj": [(q, h, layers)],
        "gate_proj": [(h, w, n) for w, n in widths],
        "up_proj": [(h, w, n) for w, n in widths],
        "down_proj": [(w, h, n) for w, n in widths],
    }


def expert_adapter_params(spec: ModelSpec, *, r: int) -> int:
    """An MoE model's expert adapters (strategies/lora.py adapts the experts' 3-D weights
    through peft's `target_parameters`, whatever `target_modules` says): in each sparse
    layer a rank-r adapter per expert on `gate_up_proj` (in h, out 2I) and on `down_proj`
    (in I, out h); 0 for a dense model.

    >>> from rollcli.models.registry import MODELS
    >>> expert_adapter_params(MODELS["tiny-random-moe"], r=4)  # 2 layers, 4 experts
    14336
    """
    h, inter = spec.hidden_size, spec.moe_intermediate_size  # 0 experts: 0
    per_layer = r * spec.num_experts * ((h + 2 * inter) + (inter + h))
    return (spec.num_layers - spec.num_dense_layers) * per_layer


def lora_param_count(spec: ModelSpec, *, r: int, target_modules: tuple[str, ...] | str) -> int:
    """Adapter parameters: `r · (in + out)` per adapted linear (A is r×in, B is out×r), and
    an MoE model's expert adapters (`expert_adapter_params`).

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
    linears = sum(r * (i + o) * n for name in names for i, o, n in shapes[name])
    return linears + expert_adapter_params(spec, r=r)

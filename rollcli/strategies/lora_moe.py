"""What LoRA adapts on an MoE model, and the line that says so.

transformers 5 keeps an MoE layer's experts as 3-D parameters of a module that is no linear
(Qwen3-MoE: `mlp.experts.gate_up_proj [E, 2I, H]`, `mlp.experts.down_proj [E, H, I]`) and its
router as the weight of a router module (`mlp.gate.weight [E, H]`, `Qwen3MoeTopKRouter`).
peft reaches the experts through `target_parameters` (its `ParamWrapper`: a rank-r adapter
per expert, `lora_A [E r, in]`, `lora_B [out, E r]`); `apply_lora` (lora.py) always adds
them on an MoE model. The attention linears are `train.lora.target_modules` as on a dense
model. The router stays frozen: a router adapter changes which experts a token reaches, and
that is what routing replay holds fixed between the sampler and the trainer.

One trap is avoided here: peft 0.21 rewrites the targets of transformers-4 MoE names
(`gate_proj`, `up_proj`, `down_proj`, the router's `gate`, and `all-linear` resolved against
the transformers-4 model) into `target_parameters`, doubling the rank of `gate_up_proj` and
adapting the router. `peft_targets` hands peft the model's own linear names instead, so the
same recipe adapts the same weights at the same rank whatever names it uses.
"""

from __future__ import annotations

import re
from typing import Any

import torch

EXPERT_MLP_NAMES = ("gate_proj", "up_proj", "down_proj")  # fused into the experts' weights
_BASE_LAYER = re.compile(r"\.base_layer(?=\.|$)")


def unwrapped_name(name: str) -> str:
    """A name without peft's wrappers: `q_proj.base_layer.weight` is `q_proj.weight`, and
    `experts.base_layer.base_layer.gate_up_proj` (two adapted parameters of one module, a
    wrapper each) `experts.gate_up_proj`.

    >>> unwrapped_name("mlp.experts.base_layer.base_layer.down_proj")
    'mlp.experts.down_proj'
    """
    return _BASE_LAYER.sub("", name)


def _leaf(module_name: str) -> str:
    return unwrapped_name(module_name).rsplit(".", 1)[-1]


def expert_parameters(model: torch.nn.Module) -> list[str]:
    """The 3-D parameters of an MoE model's experts modules as peft `target_parameters`
    (the module's last name and the parameter's: `experts.gate_up_proj`,
    `experts.down_proj` for Qwen3-MoE); [] for a dense model.

    >>> expert_parameters(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    []
    """
    names = {
        f"{_leaf(module_name)}.{name}"
        for module_name, module in model.named_modules()
        for name, p in module.named_parameters(recurse=False)
        if p.ndim == 3
    }
    return sorted(names)


def linear_names(model: torch.nn.Module) -> list[str]:
    """The last names of the model's linears but its LM head (what peft's `all-linear`
    means)."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = {
        _leaf(n)
        for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and m is not head
    }
    return sorted(names)


def peft_targets(model: torch.nn.Module, targets: tuple[str, ...] | str) -> dict[str, Any]:
    """peft's `target_modules` and `target_parameters` for `train.lora.target_modules` on
    `model`: as they are on a dense model; on an MoE model the model's own linears among
    them (`all-linear`: every one but the LM head), and every expert weight. A name that is
    neither one of its linears nor an MLP projection (the experts hold those) is refused."""
    experts = expert_parameters(model)
    if not experts:
        return {"target_modules": targets if isinstance(targets, str) else list(targets)}
    linears = linear_names(model)
    names = linears if targets == "all-linear" else list(targets)
    unknown = [n for n in names if n not in linears and n not in EXPERT_MLP_NAMES]
    if unknown:
        raise ValueError(
            f"train.lora.target_modules names {', '.join(unknown)}, which this MoE model does "
            f"not have as a linear (its linears: {', '.join(linears)}; its experts' weights "
            "are adapted whatever the list says)"
        )
    return {"target_modules": [n for n in names if n in linears], "target_parameters": experts}


def moe_note(model: Any) -> str | None:
    """One line saying what LoRA adapts on an MoE model (`model`: the peft model) and which
    matrices it leaves frozen (the router); None on a dense model."""
    from peft.tuners.lora import LoraLayer

    layers = {n: m for n, m in model.get_base_model().named_modules() if isinstance(m, LoraLayer)}
    wrapped = {  # the expert weights (and any other parameter peft wraps)
        f"{unwrapped_name(n)}.{m.parameter_name}": m
        for n, m in layers.items()
        if hasattr(m, "parameter_name")
    }
    if not expert_parameters(model):
        return None
    linears = sorted({_leaf(n) for n, m in layers.items() if not hasattr(m, "parameter_name")})
    adapted = sorted({f"{_leaf(k.rsplit('.', 1)[0])}.{k.rsplit('.', 1)[1]}" for k in wrapped})
    frozen = sorted(
        {
            ".".join(unwrapped_name(n).split(".")[-2:])
            for n, m in model.get_base_model().named_modules()
            if not isinstance(m, torch.nn.Linear | torch.nn.Embedding | LoraLayer)
            for name, p in m.named_parameters(recurse=False)
            if p.ndim == 2 and f"{unwrapped_name(n)}.{name}" not in wrapped
        }
    )
    attention = f"{', '.join(linears)} and " if linears else ""
    left = f"; the router ({', '.join(frozen)}) stays frozen" if frozen else ""
    r = model.peft_config[model.active_adapter].r
    return (
        f"LoRA on an MoE model: adapting {attention}the expert weights ({', '.join(adapted)}: "
        f"peft's target_parameters, a rank-{r} adapter per expert){left}"
    )

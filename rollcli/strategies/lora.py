"""LoRA adapters on a trained model, through peft (Hu et al. 2021, arXiv:2106.09685).

Each target linear `W` becomes `W + (alpha / r) B A`; only `A` and `B` require gradients,
so the trainer's optimizer (built over parameters that require gradients) holds state for
the adapters only. The base weights stay the loaded ones, bit for bit, which makes three
things cheap:

- the reference model is the same module with its adapters off (`adapters_off`);
- the rollout engine gets merged weights `W + (alpha / r) B A` under the base model's own
  names (`base_tensors` + `merged_value`), computed one tensor at a time as the weight sync
  reaches it, so the engine loads them like a fully trained policy;
- a checkpoint holds the adapter (`save_adapter`: peft's `adapter_model.safetensors` and
  `adapter_config.json`), and resuming loads it onto the freshly loaded base
  (`load_adapter`).

An MoE model (transformers 5 keeps each layer's experts as 3-D parameters, Qwen3-MoE's
`mlp.experts.gate_up_proj [E, 2I, H]` and `mlp.experts.down_proj [E, H, I]`, in a module
that is not a linear) gets adapters on those too, through peft's `target_parameters`
(lora_moe.py): each expert its own rank-r `B A`, merged as `W[e] + (alpha / r) B_e A_e`.
The router stays frozen, and `lora_moe.moe_note` says so in the run's one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rollcli.strategies.lora_moe import linear_names, peft_targets, unwrapped_name

ADAPTER_DIR = "adapter"  # a checkpoint's adapter folder (peft's layout)
ADAPTER_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True)
class LoraSpec:
    """The flat LoRA settings a trained worker takes (from the recipe's `train.lora`)."""

    r: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | str = ("q_proj", "k_proj", "v_proj", "o_proj")

    @classmethod
    def from_section(cls, section: Any) -> LoraSpec | None:
        """The spec of a `train.lora` section (None when LoRA is off)."""
        if section is None:
            return None
        targets = section.target_modules
        return cls(
            r=section.r,
            alpha=section.alpha,
            dropout=section.dropout,
            target_modules=targets if isinstance(targets, str) else tuple(targets),
        )


def apply_lora(model: torch.nn.Module, spec: LoraSpec) -> Any:
    """`model` wrapped by peft with fresh adapters (`B = 0`: the policy starts as the base);
    on an MoE model its expert weights too, its router not (lora_moe.py)."""
    from peft import LoraConfig, get_peft_model

    targets = spec.target_modules
    config = LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        task_type="CAUSAL_LM",
        **peft_targets(model, targets),
    )
    try:
        return get_peft_model(model, config)
    except ValueError as err:
        raise ValueError(
            f"train.lora.target_modules = {targets!r} does not fit this model ({err}); its "
            f"linear layers are {', '.join(linear_names(model))}"
        ) from None


def trainable_count(model: torch.nn.Module) -> tuple[int, int]:
    """(parameters that require gradients, all parameters)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def adapters_off(model: Any) -> contextlib.AbstractContextManager:
    """The base model (the reference policy) for the duration of the block."""
    return model.disable_adapter()


def base_tensors(model: Any) -> dict[str, torch.Tensor]:
    """The base model's tensors under its own names, in its `state_dict` order: peft's
    `q_proj.base_layer.weight` is `q_proj.weight` again, and adapter tensors are left out."""
    out = {}
    for name, tensor in model.get_base_model().state_dict(keep_vars=True).items():
        if ".lora_" in name:
            continue
        out[unwrapped_name(name)] = tensor
    return out


def merged_value(model: Any) -> Callable[[str, torch.Tensor], torch.Tensor]:
    """`value(name, base_tensor)`: the merged weight `W + (alpha / r) B A` of an adapted
    layer or expert parameter (a new tensor), the base tensor itself for every other name."""
    from peft.tuners.lora import LoraLayer

    adapted = {  # an expert parameter's wrapper (peft's ParamWrapper) names its parameter
        f"{unwrapped_name(name)}.{getattr(module, 'parameter_name', 'weight')}": module
        for name, module in model.get_base_model().named_modules()
        if isinstance(module, LoraLayer)
    }

    @torch.no_grad()
    def value(name: str, tensor: torch.Tensor) -> torch.Tensor:
        layer = adapted.get(name)
        if layer is None:
            return tensor
        delta = sum(layer.get_delta_weight(a) for a in layer.active_adapters)
        return tensor.detach() + delta.to(tensor.dtype)

    return value


def save_merged(model: Any, folder: str | Path) -> None:
    """The merged policy as a Hugging Face folder (safetensors), as a fully trained model
    would be saved; the merged tensors are copied to host memory one at a time."""
    value = merged_value(model)
    copies: dict[int, torch.Tensor] = {}  # tied weights stay one tensor (saved once)
    state = {}
    for name, tensor in base_tensors(model).items():
        if id(tensor) not in copies:
            copies[id(tensor)] = value(name, tensor).detach().to("cpu", copy=True)
        state[name] = copies[id(tensor)]
    model.get_base_model().save_pretrained(folder, state_dict=state, safe_serialization=True)


def save_adapter(model: Any, folder: str | Path) -> None:
    """peft's adapter folder: `adapter_model.safetensors` + `adapter_config.json`."""
    model.save_pretrained(str(folder), safe_serialization=True)


def load_adapter(model: Any, folder: str | Path) -> None:
    """Load a `save_adapter` folder's weights into `model`'s adapters, exactly."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(folder) / ADAPTER_WEIGHTS
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: this checkpoint holds no LoRA adapter (was the run trained "
            "without train.lora?)"
        )
    device = next(model.parameters()).device
    result = set_peft_model_state_dict(model, load_file(str(path), device=str(device)))
    missing = [k for k in result.missing_keys if ".lora_" in k]
    if missing or result.unexpected_keys:
        raise ValueError(
            f"{path} does not match this model's adapters (missing {missing[:3]}, unexpected "
            f"{list(result.unexpected_keys)[:3]}); was train.lora changed since it was saved?"
        )

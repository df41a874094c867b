"""A Hugging Face folder's tensor names against the model's own, for MoE models.

transformers 5 keeps an MoE layer's experts as 3-D parameters (Qwen3-MoE:
`mlp.experts.gate_up_proj [E, 2I, H]` and `mlp.experts.down_proj [E, H, I]`), but reads and
writes folders in the hub's layout, one 2-D tensor per expert and projection
(`mlp.experts.3.gate_proj.weight`): `from_pretrained` fuses them through the model type's
conversion mapping (`transformers.conversion_mapping`) and `save_pretrained` splits them
again (`revert_weight_conversion`). So a run's `checkpoints/step-N/model.safetensors` of an
MoE model holds names its model does not have, and loading it tensor by tensor needs the
same conversion: `to_model_layout` applies it, as `from_pretrained` does, to tensors already
in memory. A dense model has no conversion and its tensors pass through unchanged.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def _conversions(model: torch.nn.Module) -> list[Any]:
    """The model's weight conversions (renames, expert fusions) without a prefix change,
    which only fits a folder saved under another prefix: a run's folders are the model's."""
    from transformers import PreTrainedModel
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import PrefixChange

    if not isinstance(model, PreTrainedModel):
        return []
    found = get_model_conversion_mapping(model, add_legacy=False)
    return [c for c in found if not isinstance(c, PrefixChange)]


def has_conversions(model: torch.nn.Module) -> bool:
    """Whether the model's folders name its tensors otherwise than its `state_dict` does.

    >>> has_conversions(torch.nn.Linear(2, 2))
    False
    """
    return bool(_conversions(model))


@torch.no_grad()
def to_model_layout(
    model: torch.nn.Module, tensors: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """`tensors` of a saved folder (the whole folder: an expert fusion needs every expert of
    a layer) under the model's own names: renamed, and fused where the model fuses them,
    with transformers' own conversion (`convert_and_load_state_dict_in_model` without the
    loading). A name no conversion matches keeps its name."""
    from transformers.core_model_loading import (
        WeightConverter,
        WeightRenaming,
        dot_natural_key,
        rename_source_key,
    )

    conversions = _conversions(model)
    if not conversions:
        return dict(tensors)
    renamings = [c for c in conversions if isinstance(c, WeightRenaming)]
    converters = [c for c in conversions if isinstance(c, WeightConverter)]
    by_pattern = {pattern: c for c in converters for pattern in c.source_patterns}
    targets: dict[str, Any] = {}  # model name -> the transform collecting its sources
    for name, tensor in sorted(tensors.items(), key=lambda kv: dot_natural_key(kv[0])):
        target, pattern = rename_source_key(name, renamings, converters)
        if pattern is None:
            transform = targets.setdefault(target, WeightRenaming(name, target))
            pattern = name
        else:  # each target gets its own converter (they collect their sources' tensors)
            transform = targets.setdefault(target, copy.deepcopy(by_pattern[pattern]))
        transform.add_tensor(target, name, pattern, tensor)
    out = {}
    for target, transform in targets.items():
        for name, value in transform.convert(target, model=model, config=model.config).items():
            out[name] = value[0] if isinstance(value, list) else value
    return out

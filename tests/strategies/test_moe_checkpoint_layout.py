"""An MoE model's folder names each expert's tensors apart (the hub's layout) while the
model holds them fused (transformers 5): `load_saved_weights`, which `roll resume` loads a
checkpoint with, fuses them as `from_pretrained` does, and stays strict."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from rollcli.strategies.hf_checkpoint_layout import has_conversions, to_model_layout
from rollcli.strategies.hf_model import load_causal_lm, load_saved_weights


@pytest.fixture(scope="module")
def moved(tiny_moe_model):
    """tiny-random-moe with every weight moved off the saved one."""
    model = load_causal_lm(tiny_moe_model)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.01)
    return model


def _equal(a: torch.nn.Module, b: torch.nn.Module) -> None:
    got, want = a.state_dict(), b.state_dict()
    assert got.keys() == want.keys()
    for name, tensor in got.items():
        assert torch.equal(tensor, want[name]), name


@pytest.mark.parametrize("shard", [None, "300KB"])
def test_a_saved_moe_folder_loads_back_fused(moved, tiny_moe_model, tmp_path, shard) -> None:
    extra = {} if shard is None else {"max_shard_size": shard}
    moved.save_pretrained(tmp_path, safe_serialization=True, **extra)
    files = sorted(tmp_path.glob("*.safetensors"))
    assert (len(files) > 1) == (shard is not None)
    saved = {k for f in files for k in load_file(f)}
    assert "model.layers.0.mlp.experts.3.up_proj.weight" in saved  # one tensor per expert
    assert "model.layers.0.mlp.experts.gate_up_proj" not in saved
    fresh = load_causal_lm(tiny_moe_model)
    assert has_conversions(fresh)
    load_saved_weights(fresh, tmp_path, device="cpu")
    _equal(fresh, moved)


def test_the_layout_round_trips_and_a_missing_expert_is_named(moved, tmp_path) -> None:
    from transformers.core_model_loading import revert_weight_conversion

    saved = revert_weight_conversion(moved, dict(moved.state_dict()))
    back = to_model_layout(moved, saved)
    assert back.keys() == moved.state_dict().keys()
    del saved["model.layers.1.mlp.experts.2.down_proj.weight"]
    del saved["lm_head.weight"]  # tied: the embedding (save_pretrained leaves it out too)
    save_file({k: v.contiguous() for k, v in saved.items()}, tmp_path / "model.safetensors")
    with pytest.raises(
        ValueError, match=r"unexpected tensors \(or shapes\) \['model.layers.1.mlp.ex"
    ):
        load_saved_weights(moved, tmp_path, device="cpu")


def test_a_dense_model_has_no_conversion(tiny_model) -> None:
    model = load_causal_lm(tiny_model)
    assert not has_conversions(model)
    state = model.state_dict()
    assert to_model_layout(model, state).keys() == state.keys()

"""Shape-only model folders: a registry model's architecture, random weights, no download."""

from __future__ import annotations

import json

import pytest
import torch

from rollcli.models.loading import resolve_model
from rollcli.models.registry import get_model_spec
from rollcli.models.shapes import RANDOM_INIT_KEY, write_shape_folder
from rollcli.models.spec import param_count
from rollcli.strategies.hf_model import load_causal_lm


def test_a_shape_folder_builds_the_registry_shape_with_random_weights(tmp_path):
    spec = get_model_spec("smollm2-135m")
    folder = write_shape_folder(spec, tmp_path / "s", resolve_model("tiny-random"))
    assert not list(folder.glob("*.safetensors"))  # no weights written
    model = load_causal_lm(folder, dtype=torch.bfloat16)
    assert sum(p.numel() for p in model.parameters()) == param_count(spec)
    assert next(model.parameters()).dtype == torch.bfloat16


def test_a_qwen_shape_has_the_registry_numbers(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = get_model_spec("qwen2.5-7b")
    folder = write_shape_folder(spec, tmp_path / "q", resolve_model("tiny-random"))
    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):  # the shapes without the memory
        model = AutoModelForCausalLM.from_config(config)
    n = sum(p.numel() for p in model.parameters())
    # the registry's count leaves out qwen2's q/k/v biases (28 layers x 4,608)
    assert n - param_count(spec) == 28 * (3584 + 2 * 512)
    assert (config.num_hidden_layers, config.num_key_value_heads) == (28, 4)


def test_a_qwen3_moe_shape_has_the_registry_numbers(tmp_path):
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = get_model_spec("qwen3-30b-a3b")
    folder = write_shape_folder(spec, tmp_path / "m", resolve_model("tiny-random"))
    config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):  # 30.5B parameters without the memory
        model = AutoModelForCausalLM.from_config(config)
    assert type(model).__name__ == "Qwen3MoeForCausalLM"
    assert (config.num_experts, config.num_experts_per_tok, config.head_dim) == (128, 8, 128)
    assert config.norm_topk_prob
    n = sum(p.numel() for p in model.parameters())
    # the registry's count leaves out Qwen3's q/k norms (48 layers x 2 x head_dim 128)
    assert n - param_count(spec) == 48 * 2 * 128


def test_load_causal_lm_builds_an_moe_shape_with_random_weights(tmp_path):
    spec = get_model_spec("tiny-random-moe")
    folder = write_shape_folder(spec, tmp_path / "t", resolve_model("tiny-random"))
    model = load_causal_lm(folder)
    assert type(model).__name__ == "Qwen3MoeForCausalLM"
    n = sum(p.numel() for p in model.parameters())
    assert n - param_count(spec) == spec.num_layers * 2 * spec.head_dim  # the q/k norms
    logits = model(input_ids=torch.tensor([[1, 2, 3]])).logits
    assert logits.shape == (1, 3, spec.vocab_size) and torch.isfinite(logits).all()


def test_an_architecture_without_a_shape_config_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match=r"^qwen3-8b: no shape-only config for 'qwen3' \(known"):
        write_shape_folder(get_model_spec("qwen3-8b"), tmp_path / "d", resolve_model("tiny-random"))


def test_a_weightless_folder_without_the_mark_still_fails(tmp_path):
    folder = write_shape_folder(
        get_model_spec("tiny-random"), tmp_path / "t", resolve_model("tiny-random")
    )
    config = json.loads((folder / "config.json").read_text())
    del config[RANDOM_INIT_KEY]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(OSError):
        load_causal_lm(folder)

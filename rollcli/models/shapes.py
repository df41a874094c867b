"""Shape-only model folders: a registry model's architecture with random weights.

`write_shape_folder(spec, out, tokenizer_from)` writes a Hugging Face `config.json` of the
registry's numbers (qwen2.5-7b's layers, widths, heads and vocabulary; qwen3-30b-a3b's
experts too), marked `roll_random_init`, and a tokenizer, but no weights. `load_causal_lm` builds such a model
with random weights directly on the worker's device, so the GPU proof kit
(`bench/gpu_proof.py`) runs roll's own workers on models of real shapes without
downloading or writing gigabytes. Only a config that carries the mark is built at random:
a folder without weights and without the mark still fails to load.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rollcli.models.spec import ModelSpec

RANDOM_INIT_KEY = "roll_random_init"
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
)


ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}


def shape_config(spec: ModelSpec, *, eos_token_id: int, pad_token_id: int) -> dict:
    """The transformers config of `spec` (a dense llama or qwen2 decoder, or a Qwen3-MoE
    whose every layer is sparse), as a dict."""
    moe = spec.architecture == "qwen3_moe"
    known = spec.architecture in ARCHITECTURES and bool(spec.num_experts) == moe
    if not known or spec.num_dense_layers or spec.shared_expert_intermediate_size:
        raise ValueError(
            f"{spec.name}: no shape-only config for {spec.architecture!r} (known: dense llama "
            "and qwen2, qwen3_moe with every layer sparse)"
        )
    config = {
        "model_type": spec.architecture,
        "architectures": [ARCHITECTURES[spec.architecture]],
        "vocab_size": spec.vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "max_position_embeddings": spec.max_position_embeddings,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "eos_token_id": eos_token_id,
        "pad_token_id": pad_token_id,
        "torch_dtype": "bfloat16",
        RANDOM_INIT_KEY: True,
    }
    if spec.architecture == "qwen2":
        if spec.hidden_size // spec.num_attention_heads != spec.head_dim:
            raise ValueError(f"{spec.name}: qwen2 configs derive head_dim from the hidden size")
    else:
        config["head_dim"] = spec.head_dim
    if moe:  # like Qwen3-30B-A3B's config.json: top-k renormalised, no dense layer
        config.update(
            num_experts=spec.num_experts,
            num_experts_per_tok=spec.num_experts_per_token,
            moe_intermediate_size=spec.moe_intermediate_size,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        )
    return config


def write_shape_folder(spec: ModelSpec, out: Path, tokenizer_from: Path) -> Path:
    """`out` with `spec`'s marked config and the tokenizer files of `tokenizer_from` (any
    Hugging Face folder: its ids stay below the vocabulary of every registry model)."""
    out.mkdir(parents=True, exist_ok=True)
    copied = [n for n in TOKENIZER_FILES if (tokenizer_from / n).is_file()]
    if "tokenizer.json" not in copied:
        raise FileNotFoundError(f"{tokenizer_from} has no tokenizer.json")
    for name in copied:
        shutil.copyfile(tokenizer_from / name, out / name)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out))
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    config = shape_config(spec, eos_token_id=eos, pad_token_id=pad)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return out

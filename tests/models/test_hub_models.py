"""Models by Hugging Face hub id, through the real `huggingface_hub` against a hub-cache
layout built here (blobs, snapshot symlinks, refs/main), offline (`HF_HUB_OFFLINE=1`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hub_cache import COMMIT, cache_model_folder

from rollcli.config.errors import ConfigError
from rollcli.models.hub import snapshot_repo
from rollcli.models.loading import (
    ModelNotFoundError,
    check_model_here,
    download_note,
    hub_model_cached,
    resolve_model,
)
from rollcli.planning.model_spec import model_spec

REPO = "roll-test/tiny-chat"


@pytest.fixture
def hf_home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    return tmp_path / "hf"


@pytest.fixture
def cached(hf_home, tiny_model) -> Path:
    return cache_model_folder(hf_home / "hub", REPO, tiny_model)


def test_a_hub_id_is_its_cached_snapshot_at_any_revision(cached) -> None:
    assert resolve_model(REPO) == cached
    assert resolve_model(f"{REPO}@main") == cached
    assert resolve_model(f"{REPO}@{COMMIT}") == cached
    assert snapshot_repo(cached) == (REPO, COMMIT, "model")
    check_model_here(REPO)  # nothing to refuse
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve_model(REPO))
    assert model.config.num_hidden_layers == 2


def test_offline_and_not_cached_is_one_line_naming_hf_download(cached) -> None:
    for ref in ("roll-test/other", f"{REPO}@v9"):
        with pytest.raises(ModelNotFoundError) as err:
            resolve_model(ref)
        message = str(err.value)
        assert "hf download roll-test/" in message and "HF_HUB_OFFLINE" in message
        assert "\n" not in message
        with pytest.raises(ModelNotFoundError):
            check_model_here(ref)


def test_a_registry_model_with_a_hub_id_is_fetched_the_same_way(hf_home) -> None:
    with pytest.raises(ModelNotFoundError, match="hf download Qwen/Qwen2.5-7B-Instruct"):
        check_model_here("qwen2.5-7b")


def test_a_cached_snapshot_without_weights_is_not_the_model(hf_home, tiny_model, tmp_path) -> None:
    # the tokenizer files alone, as `roll data preview` or AutoTokenizer fetch them
    partial = tmp_path / "partial"
    shutil.copytree(tiny_model, partial)
    (partial / "model.safetensors").unlink()
    cache_model_folder(hf_home / "hub", REPO, partial)
    assert hub_model_cached(REPO) is None
    with pytest.raises(ModelNotFoundError, match=f"holds {REPO} without its weights"):
        resolve_model(REPO)


def test_plan_reads_a_hub_model_from_the_cache_and_never_downloads(cached) -> None:
    spec = model_spec(REPO)
    assert (spec.num_layers, spec.hidden_size, spec.vocab_size) == (2, 128, 49152)
    with pytest.raises(ConfigError) as err:
        model_spec("roll-test/unknown")
    assert "`hf download roll-test/unknown config.json`" in str(err.value)
    # a hub id the registry knows is planned from the registry's numbers, cached or not
    assert model_spec("Qwen/Qwen2.5-7B-Instruct").name == "qwen2.5-7b"


def test_online_a_missing_model_is_a_download_note(cached, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    note = download_note("roll-test/other")
    assert note is not None and "`roll train` downloads it" in note
    assert download_note(REPO) is None  # cached
    assert download_note("tiny-random") is None  # built here


def test_a_worker_on_another_node_finds_the_snapshot_in_its_own_cache(cached, tmp_path) -> None:
    from rollcli.distributed.node_files import node_model_folder

    # the driver's path, under a cache this node does not have
    driver = tmp_path / "elsewhere" / "hub" / "models--roll-test--tiny-chat" / "snapshots" / COMMIT
    assert node_model_folder(driver) == cached

"""Choosing the inference engine: `auto` follows what is installed; a missing vllm is named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rollcli.config.engines import EngineUnavailableError, resolve_engine, vllm_available
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker


def test_auto_picks_vllm_exactly_when_installed() -> None:
    assert resolve_engine("auto") == ("vllm" if vllm_available() else "hf")
    assert resolve_engine("hf") == "hf"


def test_an_unknown_engine_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="auto, hf, vllm"):
        resolve_engine("sglang-typo")


@pytest.mark.skipif(vllm_available(), reason="vllm is installed here")
def test_vllm_without_the_package_says_make_vllm(tiny_model) -> None:
    with pytest.raises(EngineUnavailableError, match="make vllm"):
        ActorInferWorker(ActorInferArgs(str(tiny_model), engine="vllm"))


def test_the_hf_worker_is_named_hf(tiny_model) -> None:
    assert ActorInferWorker(ActorInferArgs(str(tiny_model), engine="hf")).engine_name == "hf"


def test_engine_modules_import_vllm_only_when_an_engine_is_built() -> None:
    code = (
        "import sys, rollcli.workers.actor_infer, rollcli.strategies.vllm_infer; "
        "assert 'vllm' not in sys.modules, 'vllm imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

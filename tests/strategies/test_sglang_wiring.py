"""`rollout.engine: sglang` reaches the actor_infer worker; where sglang is missing (this
machine) every entry point says so in one line naming the install. The engine itself needs
a GPU (docs/gpu.md)."""

from __future__ import annotations

import importlib.util

import pytest
from error_text import error_message, flat
from roll_subprocess import roll

from rollcli.config.engines import EngineUnavailableError, resolve_engine
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.strategy_spec import ENGINES
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang") is not None, reason="sglang is installed here"
)


def test_resolving_sglang_names_the_install() -> None:
    with pytest.raises(EngineUnavailableError, match="pip install sglang") as err:
        resolve_engine("sglang")
    assert "\n" not in str(err.value)


def test_the_worker_builds_the_sglang_engine_by_name(tiny_model) -> None:
    assert ENGINES["sglang"].engine_class == "rollcli.strategies.sglang_infer:SGLangInferEngine"
    with pytest.raises(EngineUnavailableError, match="pip install sglang"):
        ActorInferWorker(ActorInferArgs(str(tiny_model), engine="sglang"))


def test_the_engine_refuses_a_machine_without_cuda() -> None:
    import torch

    from rollcli.strategies.sglang_infer import SGLangInferEngine, SGLangUnavailableError

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(SGLangUnavailableError, match="GPUs only"):
        SGLangInferEngine("unused", [0])


def test_recipe_validation_lists_the_engines() -> None:
    with pytest.raises(ConfigError, match="'sglang'"):
        load_recipe("rlvr-math", ["rollout.engine=sglng"], {})
    cfg, _ = load_recipe("rlvr-math", ["rollout.engine=sglang"], {"resources.gpus": 1})
    assert cfg.rollout.engine == "sglang"
    with pytest.raises(ConfigError, match="sglang runs on GPUs only"):  # on any machine
        load_recipe("rlvr-math", ["rollout.engine=sglang"], {})


def test_roll_train_refuses_sglang_in_one_line_before_launching(tmp_path) -> None:
    res = roll(
        "train", "rlvr", "rollout.engine=sglang", "--gpus", "1", "--runs-dir", str(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2  # here first for want of a GPU: the machine checks stop there
    # the note on which scale `rlvr` picked comes first, then the one-line refusal
    assert res.stderr.startswith("note: recipe rlvr-paper: `rlvr` on 1 GPU")
    assert error_message(res.stderr[res.stderr.index("error: ") :])
    assert "Traceback" not in res.stderr
    assert not any(tmp_path.iterdir())  # nothing was launched
    dry = roll("train", "rlvr", "rollout.engine=sglang", "--gpus", "1", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0  # every machine check a note, the sglang one among them
    notes = flat(dry.stderr)  # each note wrapped at 80 columns
    assert "rollout.engine: sglang needs sglang, not installed: pip install sglang" in notes

"""DeepSpeed's "Setting accelerator to CPU" line stays out of a CPU run's output: the run
names the CPU before anything (the driver's model conversion, a worker) imports deepspeed."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys

import pytest

import rollcli.distributed.deepspeed_env as deepspeed_env
from rollcli.config.loader import load_recipe
from rollcli.launch import launch


class _Stop(Exception):
    pass


def _unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """DS_ACCELERATOR unset for the test and restored after it (what the code sets too)."""
    monkeypatch.setenv("DS_ACCELERATOR", "recorded")
    monkeypatch.delenv("DS_ACCELERATOR")


def test_docstring_examples(monkeypatch: pytest.MonkeyPatch) -> None:
    _unset(monkeypatch)
    assert doctest.testmod(deepspeed_env).failed == 0


@pytest.mark.parametrize(("gpus", "named"), [(0, "cpu"), (1, None)])
def test_a_run_names_the_cpu_before_it_prepares_the_model(
    monkeypatch: pytest.MonkeyPatch, gpus: int, named: str | None
) -> None:
    _unset(monkeypatch)
    seen = []

    def prepare(cfg, display):  # noqa: ANN001, ANN202
        seen.append(os.environ.get("DS_ACCELERATOR"))
        raise _Stop

    monkeypatch.setattr(launch, "_prepare_model", prepare)
    from rollcli.planning.auto_strategy import AutoChoice

    monkeypatch.setattr(
        launch, "_check_supported", lambda cfg, display=None: (AutoChoice(cfg, []), None)
    )
    cfg, _ = load_recipe("rlvr-math", [f"resources.gpus={gpus}"])
    with pytest.raises(_Stop):
        launch.launch_training(cfg, display=None)  # type: ignore[arg-type]
    assert seen == [named]


def test_a_user_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DS_ACCELERATOR", "xpu")
    deepspeed_env.name_cpu_accelerator(on_gpu=False)
    assert os.environ["DS_ACCELERATOR"] == "xpu"


@pytest.mark.slow  # ~15-20 s: a fresh interpreter imports transformers and deepspeed
def test_transformers_saving_a_model_prints_no_accelerator_line(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("deepspeed")
    code = (
        "from rollcli.distributed.deepspeed_env import name_cpu_accelerator\n"
        "name_cpu_accelerator(on_gpu=False)\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "cfg = LlamaConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1,\n"
        "    num_attention_heads=2, num_key_value_heads=1, vocab_size=10)\n"
        f"LlamaForCausalLM(cfg).save_pretrained({str(tmp_path)!r})\n"
        "import sys; print('deepspeed' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"  # transformers did import it
    assert "Setting accelerator" not in done.stdout + done.stderr

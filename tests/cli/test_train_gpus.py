"""`roll train --gpus N`: what a GPU run may train, and the one-line refusal on a machine
whose GPUs (or CUDA build of torch) are missing — before a run folder or Ray starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.launch import gpu_support
from rollcli.launch.gpu_support import check_gpus_visible, visible_gpu_count


def _cfg(recipe: str, *overrides: str, gpus: int = 2, ray_address: str | None = None):
    flags = {"resources.gpus": gpus, "resources.ray_address": ray_address}
    return load_recipe(recipe, list(overrides), flags)[0]


@pytest.mark.skipif(gpu_support.visible_gpu_count() > 0, reason="a machine with GPUs")
def test_train_with_gpus_on_a_machine_without_them_is_one_line_and_starts_nothing(
    tmp_path: Path,
) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rollcli", "train", "rlvr-math", "--model", "tiny-random",
         "--gpus", "2", "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "300"},
    )  # fmt: skip
    assert res.returncode == 2, res.stderr
    # the at-scale note comes first (rlvr-math on GPUs runs as written), then the refusal,
    # wrapped at 80 columns on a 300-column terminal
    assert res.stderr.startswith("note: recipe rlvr-math on 2 GPUs runs as written")
    message = error_message(res.stderr[res.stderr.index("error: ") :])
    assert "Traceback" not in res.stderr
    assert "--gpus 2: no CUDA GPU is visible on this machine" in message
    assert "--gpus 0" in message
    assert not any(tmp_path.iterdir())  # no run folder


def test_pipelines_not_wired_for_gpus_are_refused_by_name(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app, ["train", "sft", "--gpus", "1", "--runs-dir", str(tmp_path)], env={"COLUMNS": "300"}
    )
    assert res.exit_code == 2
    assert "--gpus 1: the sft pipeline runs on CPU only in this build" in res.output
    assert "rlvr" in res.output and not any(tmp_path.iterdir())
    with pytest.raises(ConfigError, match="train.strategy: megatron cannot train in this build"):
        _cfg("rlvr-math", "train.strategy=megatron")


def test_rlvr_with_hf_or_deepspeed_and_any_engine_is_allowed_on_gpus() -> None:
    for strategy in ("hf", "deepspeed"):
        for engine in ("hf", "vllm", "sglang"):
            _cfg("rlvr-math", f"train.strategy={strategy}", f"rollout.engine={engine}")
    _cfg("sft", gpus=0)  # a CPU run of any pipeline loads
    with pytest.raises(ConfigError, match="sglang runs on GPUs only"):
        _cfg("rlvr-math", "rollout.engine=sglang", gpus=0)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch) -> None:
    monkeypatch.setattr(gpu_support, "nvidia_smi_gpus", lambda: [f"GPU {i}" for i in range(4)])
    assert visible_gpu_count({}) == 4
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,2"}) == 2
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    assert visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}) == 4  # not more than exist


def test_local_gpu_runs_need_the_gpus_and_a_cuda_torch() -> None:
    cfg = _cfg("rlvr-math", gpus=2)
    with pytest.raises(ConfigError, match="--gpus 2: only 1 CUDA GPU"):
        check_gpus_visible(cfg, visible=1)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="cannot use CUDA .* install the CUDA build"):
            check_gpus_visible(cfg, visible=2)
    # joining a cluster: its GPUs are Ray's to find (the driver may have none)
    check_gpus_visible(_cfg("rlvr-math", ray_address="10.0.0.1:6379"), visible=0)
    check_gpus_visible(_cfg("rlvr-math", gpus=0), visible=0)

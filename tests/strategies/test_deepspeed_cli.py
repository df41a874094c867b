"""`roll train` with train.strategy=deepspeed on tiny-random, for real (gloo on CPU):
a ZeRO-3 run writes DeepSpeed checkpoints and `roll resume` loads them and trains on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from error_text import error_message
from roll_subprocess import roll

pytest.importorskip("deepspeed")

SMALL = [
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "rollout.max_new_tokens=8",
    "data.val_size=4",
    "data.train_size=50",
    "train.micro_batch_size=4",
    "run.eval_every=0",
    "train.strategy=deepspeed",
]


def _steps(run: Path) -> list[int]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "actor/grad_norm" in r]


@pytest.mark.slow  # ~130 s; the ZeRO-2/3 step itself is checked by test_deepspeed_train.py
@pytest.mark.parametrize("stage", [3, 2])
def test_zero_run_checkpoints_and_resumes(tmp_path, tiny_model, stage) -> None:
    run = tmp_path / "z"
    res = roll(
        "train", "rlvr", "--model", "tiny-random", "--steps", "1", "--save-every", "1",
        "--runs-dir", str(tmp_path), "--run-id", "z", *SMALL,
        f"devices.actor_train.zero_stage={stage}", cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    ckpt = run / "checkpoints" / "step-1"
    assert (ckpt / "deepspeed" / "state").is_dir()  # DeepSpeed's partitioned states
    assert (ckpt / "model.safetensors").is_file()  # whole weights, gathered under ZeRO-3
    res = roll("resume", "z", "--runs-dir", str(tmp_path), "train.steps=2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _steps(run) == [1, 2]
    assert (run / "checkpoints" / "step-2" / "deepspeed" / "state").is_dir()
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(run / "checkpoints" / "step-2"))
    assert model.config.num_hidden_layers == 2


def test_deepspeed_refuses_an_offline_pipeline(tmp_path) -> None:
    res = roll(
        "train", "sft", "train.strategy=deepspeed", "--runs-dir", str(tmp_path), cwd=tmp_path
    )
    assert res.returncode == 2
    assert "wired into the rlvr and agentic pipelines only" in error_message(res.stderr)
    assert not any(tmp_path.iterdir())  # nothing was launched

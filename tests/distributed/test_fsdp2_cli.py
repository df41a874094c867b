"""`roll train rlvr-math train.strategy=fsdp2 train.num_workers=2` on the embedded model
(smollm2-135m), for real: two FSDP2 ranks over gloo train through the CLI, checkpoint (a
transformers folder gathered on rank 0 plus the ranks' DCP shards) and `roll resume` loads
the shards and trains on."""

from __future__ import annotations

import json
import shutil

import pytest
from roll_subprocess import roll

SMALL = [
    "train.strategy=fsdp2",
    "train.num_workers=2",
    "rollout.batch_size=8",
    "rollout.group_size=4",
    "data.val_size=4",
    "run.eval_every=0",
    "run.keep_last=1",  # a step's checkpoint is 2.2 GB (fp32 weights + sharded Adam states)
]


@pytest.mark.slow  # 6.5 min on 2 busy cores: two steps (3.5 min), then the resumed third
def test_two_fsdp2_ranks_train_checkpoint_and_resume(tmp_path) -> None:
    run = tmp_path / "fsdp2"
    try:
        res = roll(
            "train", "rlvr-math", "--steps", "2", "--save-every", "1",
            "--runs-dir", str(tmp_path), "--run-id", "fsdp2", *SMALL, cwd=tmp_path,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-3000:]
        ckpt = run / "checkpoints" / "step-2"
        assert (ckpt / "fsdp2" / ".metadata").is_file()  # both ranks' shards
        assert (ckpt / "model.safetensors").is_file()  # whole weights, gathered on rank 0
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(ckpt))
        assert model.config.num_hidden_layers == 30  # smollm2-135m
        res = roll("resume", "fsdp2", "--runs-dir", str(tmp_path), "train.steps=3", cwd=tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in rows if "actor/grad_norm" in r]
        assert [r["step"] for r in steps] == [1, 2, 3]
        assert all(r["actor/grad_norm"] > 0 for r in steps)
        assert (run / "checkpoints" / "step-3" / "fsdp2" / ".metadata").is_file()
    finally:
        shutil.rmtree(run, ignore_errors=True)  # gigabytes: do not leave them to pytest

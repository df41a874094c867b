"""Kill an MoE run (tiny-random-moe: 2 layers, 4 experts, top-2) with SIGKILL as step 3
trains, `roll resume` it, and it ends as the uninterrupted run: the same metrics step for
step and bitwise the same weights.

The hf trainer (the CPU default: bf16-mixed where the CPU has bf16, with the engine's bf16
copies of the linears and experts), a coin-flip reward so that every step moves the weights,
a checkpoint every step. Resuming loads step-2's folder, whose experts are one tensor each
(the hub's layout), into the model's fused 3-D experts (hf_checkpoint_layout.py), the Adam
states, the RNG and the data position. The dense runs' kills: test_resume.py.
"""

from __future__ import annotations

import signal

import pytest
import torch
from roll_subprocess import roll
from same_run import assert_same_metrics

pytestmark = pytest.mark.slow  # ~2-3 min: three processes, each starting Ray and its workers

STEPS = 4
ARGS = [
    "--model", "tiny-random-moe", "--steps", str(STEPS), "--save-every", "1",
    "--eval-every", "2", "rollout.batch_size=8", "rollout.group_size=4",
    "rollout.max_new_tokens=8", "data.val_size=4", "data.train_size=8",
    "algorithm.kl_coef=0.01", "reward.fn=coin_rewards:coin",
]  # fmt: skip


def _train(runs, run_id: str, fault: str = ""):  # noqa: ANN001, ANN202
    args = ["train", "rlvr-math", "--runs-dir", str(runs), "--run-id", run_id, *ARGS]
    return roll(*args, cwd=runs, fault=fault)


def test_a_killed_moe_run_resumes_to_the_same_weights_bit_for_bit(tmp_path, tiny_moe_model):
    from safetensors.torch import load_file

    res = _train(tmp_path, "ref")
    assert res.returncode == 0, res.stderr[-3000:]
    res = _train(tmp_path, "killed", fault="kill@train:3")
    assert res.returncode == -signal.SIGKILL, res.stderr[-2000:]
    killed = tmp_path / "killed"
    assert not (killed / "checkpoints" / "step-3").exists()
    res = roll("resume", "killed", "--runs-dir", str(tmp_path), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming from checkpoint step-2" in (killed / "events.log").read_text()

    assert_same_metrics(killed, tmp_path / "ref")
    last = f"checkpoints/step-{STEPS}/model.safetensors"
    got, want = load_file(killed / last), load_file(tmp_path / "ref" / last)
    assert got.keys() == want.keys()
    assert "model.layers.1.mlp.experts.3.gate_proj.weight" in got
    assert [k for k in got if not torch.equal(got[k], want[k])] == []
    first = load_file(tiny_moe_model / "model.safetensors")  # and the run trained them
    moved = [k for k in got if not torch.equal(got[k], first[k])]
    assert any(".mlp.experts." in k for k in moved) and any(".mlp.gate." in k for k in moved)

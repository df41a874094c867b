"""`roll train ... train.lora.*` on tiny-random through the real CLI, Ray and workers.

DPO (the reference is actor_train with its adapters off: no reference worker) is killed as
step 2 starts training and resumed: the adapters must be bitwise those of the uninterrupted
run. The other pipelines run 2 steps each (slow tier)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from roll_subprocess import roll
from same_run import assert_same_run, untimed

HERE = Path(__file__).parent
LORA = ["train.lora.r=4", "train.lora.alpha=8", "train.lora.target_modules=[q_proj,v_proj]"]
COMMON = [
    "--model", "tiny-random", "--steps", "2", "--save-every", "1", "--eval-every", "1",
    "data.val_size=4", "train.micro_batch_size=2", "train.lr=1e-2", *LORA,
]  # fmt: skip
SMALL = {
    "dpo": ["data.train_size=40", "dpo.batch_size=4", "dpo.max_response_tokens=16"],
    "sft": ["data.train_size=40", "sft.batch_size=4", "sft.max_tokens=128",
            "rollout.max_new_tokens=4"],
    "distill": ["data.train_size=40", "distill.batch_size=4", "distill.top_k=8",
                "rollout.max_new_tokens=4"],
    "rlvr-math-lora": ["data.train_size=8", "rollout.batch_size=8", "rollout.group_size=4",
                       "rollout.max_new_tokens=8", "algorithm.kl_coef=0.01",
                       "reward.fn=coin_rewards:coin"],
    "agentic-frozenlake": ["agentic.group_size=2", "agentic.groups_per_step=2",
                           "agentic.val_episodes=2", "agentic.max_turns=2",
                           "rollout.max_new_tokens=8", "algorithm.kl_coef=0.01",
                           "warmup=null"],  # a warm-up would train adapters RL does not load
}  # fmt: skip


def train(recipe: str, run_id: str, runs: Path, fault: str = "") -> Path:
    args = ["train", recipe, "--runs-dir", str(runs), "--run-id", run_id, *COMMON]
    result = roll(*args, *SMALL[recipe], cwd=runs, fault=fault, pythonpath=HERE)
    if fault:
        assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    else:
        assert result.returncode == 0, result.stderr[-3000:]
    return runs / run_id


def _check_lora_run(run: Path, reference_in_actor: bool, moves: bool = True) -> None:
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    events = (run / "events.log").read_text()
    assert "LoRA r=4, alpha=8 on ['q_proj', 'v_proj']" in events
    assert ("the reference is actor_train with its adapters off" in events) == reference_in_actor
    step2 = run / "checkpoints" / "step-2"
    adapter = load_file(step2 / "adapter" / "adapter_model.safetensors")
    assert adapter and all(".lora_A." in k or ".lora_B." in k for k in adapter)
    moved = any(t.abs().sum() > 0 for k, t in adapter.items() if ".lora_B." in k)
    grad_norms = [r.get("actor/grad_norm", 0.0) for r in untimed(run)]
    assert moved == moves == any(g > 0 for g in grad_norms)  # trained where there was signal
    AutoModelForCausalLM.from_pretrained(step2)  # the merged policy loads as a plain model


@pytest.mark.slow  # ~3-5 min: three runs, each starting Ray; tests/workers/test_lora.py keeps
# an in-process save / load / next-step bitwise check in the default tier
def test_dpo_with_lora_killed_and_resumed_repeats_the_run(tmp_path) -> None:
    ref = train("dpo", "ref", tmp_path)
    _check_lora_run(ref, reference_in_actor=True)
    killed = train("dpo", "killed", tmp_path, fault="kill@train:2")
    assert (killed / "checkpoints" / "step-1" / "COMPLETE").exists()
    result = roll("resume", "killed", "--runs-dir", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "resuming from checkpoint step-1" in (killed / "events.log").read_text()
    assert_same_run(killed, ref, 2, weights="adapter/adapter_model.safetensors")


@pytest.mark.slow  # ~1 min each: a 2-step run per pipeline
@pytest.mark.parametrize(
    ("recipe", "reference_in_actor", "moves"),
    [
        ("sft", False, True),
        ("distill", False, True),
        ("rlvr-math-lora", True, True),
        # tiny-random fails every episode: equal returns, zero advantages, nothing to learn
        ("agentic-frozenlake", True, False),
    ],
)
def test_each_pipeline_trains_lora_adapters(recipe, reference_in_actor, moves, tmp_path) -> None:
    _check_lora_run(train(recipe, "lora", tmp_path), reference_in_actor, moves)

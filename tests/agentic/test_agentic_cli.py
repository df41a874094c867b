"""`roll train` of the agentic recipes on tiny-random: the real CLI, Ray, env workers and
model workers, 2 steps each (frozenlake and webshop in the default tier, sokoban slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from roll_subprocess import roll

SMALL = [
    "agentic.group_size=2",
    "agentic.groups_per_step=2",
    "agentic.val_episodes=2",
    "agentic.max_turns=2",
    "agentic.num_env_workers=2",
    "rollout.max_new_tokens=4",
    "train.micro_batch_size=2",
]
STEP_KEYS = {
    "env/success_rate",
    "env/valid_action_rate",
    "env/effective_action_rate",
    "env/mean_steps",
    "env/format_penalty",
    "env/env_errors",
    "reward/mean",
    "actor/pg_loss",
    "actor/grad_norm",
    "time/rollout_s",
    "rollout/gen_batch_mean",
}


def _train(recipe: str, tmp_path: Path, *extra: str) -> Path:
    result = roll(
        "train", recipe, "--model", "tiny-random", "--steps", "2", "--runs-dir", str(tmp_path),
        "--run-id", "t", *SMALL, *extra, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp_path / "t"


def _check_run(run: Path, env: str, max_turns: int = 2) -> None:
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert {"val/success_rate", "val/valid_action_rate", "val/accuracy"} <= metrics[0].keys()
    for m in metrics[1:]:
        assert m.keys() >= STEP_KEYS, STEP_KEYS - m.keys()
        assert 1.0 <= m["env/mean_steps"] <= max_turns
        assert m["env/env_errors"] == 0.0
    assert "val/success_rate" in metrics[2]
    samples = [json.loads(x) for x in (run / "samples" / "step-2.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(s["env"] == env for s in samples)
    assert samples[0]["messages"][0]["role"] == "system"
    assert samples[0]["messages"][2]["role"] == "assistant" and samples[0]["steps"]
    assert samples[0]["seed"] == samples[1]["seed"]  # a group shares its seed
    assert (run / "checkpoints" / "step-2" / "model.safetensors").exists()


def test_frozenlake_trains_two_steps_and_evaluates_by_run_id(tmp_path, tiny_model) -> None:
    _check_run(_train("agentic-frozenlake", tmp_path, "agentic.mode=gigpo"), "frozenlake")
    # roll eval on the run id plays its newest checkpoint
    result = roll(
        "eval", "frozenlake", "--model", "t", "--runs-dir", str(tmp_path), "--n", "2", "--json",
        "rollout.max_new_tokens=4", cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["episodes"] == 2


@pytest.mark.slow
def test_sokoban_trains_two_steps(tmp_path, tiny_model) -> None:
    _check_run(_train("agentic-sokoban", tmp_path), "sokoban")


@pytest.mark.slow  # ~40 s; the pipeline runs by default in the frozenlake test, webshop's env in tests/webshop
def test_webshop_trains_two_steps(tmp_path, tiny_model) -> None:
    run = _train("webshop", tmp_path, "agentic.env_kwargs.num_products=200")
    _check_run(run, "webshop")


@pytest.mark.slow
def test_a_dead_model_worker_mid_episode_restarts_from_the_checkpoint(tmp_path, tiny_model) -> None:
    os.environ["ROLL_INJECT_FAULT"] = "kill-worker@generate:2+0.3"
    try:
        run = _train("agentic-frozenlake", tmp_path, "--save-every", "1")
    finally:
        del os.environ["ROLL_INJECT_FAULT"]
    events = (run / "events.log").read_text()
    assert "a worker died during step 2" in events and "retrying from step 2" in events
    _check_run(run, "frozenlake")

"""`roll train` on the tool environment with tiny-random: the real CLI, Ray, env workers
with a built-in and a user tool, one step. The reply prefix opens a tool call that a random
model never closes, so every turn is a counted `malformed` tool error, never a crash. And
the `agentic-tool-math` recipe itself, tiny: its expert warm-up, one RL step, the tool
metrics in `roll logs` and `roll plot`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roll_subprocess import roll

RECIPE = """\
name: tool-smoke
description: the tool env, one step
pipeline: agentic
model: smollm2-135m
seed: 1
algorithm: {name: grpo, kl_coef: 0.0}
agentic:
  env: tool
  env_kwargs: {tools: [calculator, "cli_tools_for_test:lookup"], tasks: arithmetic}
  reply_prefix: '<tool_call>{"name": "calculator", "arguments": {"expression": "'
  group_size: 2
  groups_per_step: 2
  max_turns: 2
  max_context_tokens: 1024
  num_env_workers: 1
  val_episodes: 2
rollout: {max_new_tokens: 6}
train: {steps: 1, micro_batch_size: 2}
run: {eval_every: 0}
"""
USER_TOOL = '''\
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key
    """
    return key.upper()
'''


@pytest.mark.slow  # ~55 s on 2 shared cores
def test_the_tool_env_trains_one_step_and_counts_tool_errors(tmp_path: Path, tiny_model) -> None:
    (tmp_path / "tool.yaml").write_text(RECIPE)
    (tmp_path / "cli_tools_for_test.py").write_text(USER_TOOL)
    result = roll(
        "train", str(tmp_path / "tool.yaml"), "--model", "tiny-random", "--runs-dir",
        str(tmp_path), "--run-id", "t", cwd=tmp_path, pythonpath=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "t"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    last = metrics[-1]
    assert last["env/env_errors"] == 0.0 and last["env/mean_steps"] == 2.0
    assert last["env/tool_calls"] == 8.0  # 4 episodes x 2 turns, each an unclosed call
    assert last["env/tool_error/malformed"] == 8.0 and last["env/tool_call_valid"] == 0.0
    assert "val/tool_calls" in metrics[0]
    episode = json.loads((run / "samples" / "step-1.jsonl").read_text().splitlines()[0])
    system, _, reply, result_turn = episode["messages"][:4]
    assert '"name": "lookup"' in system["content"]  # the user tool, declared (SmolLM2)
    assert reply["content"].startswith("<tool_call>")
    assert result_turn["role"] == "user"
    assert result_turn["content"].startswith(
        "<tool_response>\nError: the <tool_call> is not closed"
    )


@pytest.mark.slow  # ~50 s on 2 shared cores
def test_the_tool_math_recipe_warms_up_on_the_expert_and_trains(tmp_path: Path, tiny_model) -> None:
    """`roll train agentic-tool-math` as shipped but tiny: the expert warm-up, one RL step,
    and the tool metrics in `roll logs` and `roll plot`."""
    small = [
        "warmup.episodes=6", "warmup.val_episodes=2", "warmup.steps=1", "warmup.batch_size=4",
        "agentic.group_size=2", "agentic.groups_per_step=2", "agentic.val_episodes=2",
        "agentic.max_turns=2", "rollout.max_new_tokens=8", "train.micro_batch_size=2",
        "agentic.keep_top_groups=1.0",  # tiny-random's episodes all score alike
    ]  # fmt: skip
    result = roll(
        "train", "tool-math", "--model", "tiny-random", "--steps", "1", "--runs-dir",
        str(tmp_path), "--run-id", "tm", *small, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "tm"
    rows = [json.loads(x) for x in (run / "warmup" / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 6
    assert all(r["messages"][2]["content"].startswith("<tool_call>\n") for r in rows)
    assert all(r["messages"][4]["content"].startswith("<answer>") for r in rows)
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1]
    assert {"val/tool_calls_per_episode", "val/tool_call_valid"} <= metrics[0].keys()
    step = metrics[1]
    assert step["env/env_errors"] == 0.0 and 1.0 <= step["env/mean_steps"] <= 2.0
    kinds = sum(v for k, v in step.items() if k.startswith("env/tool_error/"))
    assert step["env/tool_errors"] == kinds and 0.0 <= step["env/tool_call_valid"] <= 1.0

    from typer.testing import CliRunner

    from rollcli.cli.app import app
    from rollcli.runs.plot import draw_run

    logs = CliRunner().invoke(
        app, ["logs", "tm", "--runs-dir", str(tmp_path)], env={"COLUMNS": "200"}
    )
    assert logs.exit_code == 0 and "calls/ep " in logs.stdout and "tool errors " in logs.stdout
    plot = CliRunner().invoke(app, ["plot", "tm", "--runs-dir", str(tmp_path)])
    assert plot.exit_code == 0 and (run / "plot.png").exists()
    assert draw_run(metrics, title="tm").axes[7].get_title().startswith("tool use  (last ")

"""`roll train` on the tool environment with tiny-random: the real CLI, Ray, env workers
with a built-in and a user tool, one step. The reply prefix opens a tool call that a random
model never closes, so every turn is a counted `malformed` tool error, never a crash."""

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

"""`roll train` with an agent program (`agentic.agent`): the CLI app in this process, Ray,
the hf engine behind roll's OpenAI-compatible endpoint, a program (endpoint_agent.py) using
the real `openai` client,
one RL step on tiny-random. The episodes trained are the program's conversations, token
for token; a program that crashes costs its episode, not the run; a request without the
run's key is refused and counted, and the key is written nowhere."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import endpoint_agent
import pytest
from roll_in_process import cli

pytest.importorskip("openai")
pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


def test_an_agent_program_trains_through_the_endpoint(tmp_path: Path, tiny_model) -> None:
    """One step, then a stop: tiny-random with a hand-made template that upper-cases the
    replies it renders, so every second turn's re-rendered prompt drifts from the ids it was
    built from, above `agentic.max_template_drift`."""
    model = tmp_path / "upper-model"
    shutil.copytree(tiny_model, model)
    template = (model / "chat_template.jinja").read_text()
    assert "message['content']" in template
    (model / "chat_template.jinja").write_text(template.replace(
        "message['content']",
        "(message['content'] | upper if message['role'] == 'assistant' else message['content'])",
    ))  # fmt: skip
    small = [
        "warmup=null", "agentic.agent=endpoint_agent:run_episode", "agentic.group_size=2",
        "agentic.groups_per_step=2", "agentic.val_episodes=2", "agentic.max_turns=3",
        "rollout.max_new_tokens=6", "train.micro_batch_size=2", "agentic.keep_top_groups=1.0",
        "agentic.max_template_drift=0.25",
    ]  # fmt: skip
    endpoint_agent.KEYS_SEEN.clear()
    endpoint_agent.INTRUSIONS.clear()
    code, err = cli(
        "train", "tool-math-agent", "--model", str(model), "--steps", "3", "--runs-dir",
        str(tmp_path), "--run-id", "a", *small,
    )  # fmt: skip
    assert code == 130, err[-3000:]  # stopped early, as asked
    assert "stopped (SIGINT); continue with: roll resume a" in " ".join(err.split())
    run = tmp_path / "a"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1]
    step = metrics[1]
    assert step["env/mean_steps"] == 2.0 and step["rollout/gen_calls"] == 2.0
    assert step["rollout/agent_requests_refused"] == 0.0
    assert step["actor/grad_norm"] > 0.0  # trained on the programs' episodes
    assert step["agentic/template_drift"] == step["agentic/retokenize_drift"] == 1.0
    events = (run / "events.log").read_text()
    assert "template drift 1.000 at step 1 is above agentic.max_template_drift = 0.25" in events
    # the first validation episode's request with the old fixed key "roll", at step 0's
    # validation: 401, no turn (the episode plays on unharmed), counted at the next step
    assert endpoint_agent.INTRUSIONS == [401]
    assert step["agentic/endpoint_refused"] == 1.0
    assert "step 1: the agent endpoint refused 1 request(s) without the run's key" in events
    (key,) = endpoint_agent.KEYS_SEEN  # one key for the run, random, in no file nor on stderr
    assert key.startswith("roll-") and len(key) > 40 and key not in err
    for path in run.rglob("*"):
        assert not path.is_file() or key.encode() not in path.read_bytes(), path
    assert (run / "checkpoints" / "step-1").is_dir()
    episodes = [json.loads(x) for x in (run / "samples" / "step-1.jsonl").read_text().splitlines()]
    assert len(episodes) == 4
    for ep in episodes:
        roles = [m["role"] for m in ep["messages"]]
        assert roles == ["system", "user", "assistant", "user", "assistant"]
        assert ep["messages"][0]["content"] == "Be brief."
        assert ep["messages"][3]["content"] == "And?"
    assert step["env/env_errors"] == 0.0
    assert metrics[0]["val/env_errors"] == 1.0 and metrics[0]["val/n"] == 2.0

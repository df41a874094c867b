"""An agentic recipe's warm-up is checked before anything starts: an expert that cannot play
the recipe's tasks is refused naming warmup=null and warmup.data; `warmup.steps=0` is no
warm-up; `warmup.data` is the user's own conversations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.launch.prelaunch import check_recipe
from rollcli.launch.warmup import check_warmup, warmup_episodes

TASKS = """CAPITALS = [("France", "Paris"), ("Japan", "Tokyo"), ("Peru", "Lima")]


def capital(seed):
    country, city = CAPITALS[seed % len(CAPITALS)]
    return {"prompt": f"What is the capital of {country}?", "answer": city}
"""


@pytest.fixture
def own_tasks(tmp_path, monkeypatch) -> Path:
    (tmp_path / "my_tasks.py").write_text(TASKS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_an_expert_that_cannot_play_the_users_tasks_is_refused_first(own_tasks) -> None:
    cfg, _ = load_recipe(
        "agentic-tool-math-agent", ["agentic.env_kwargs.tasks=my_tasks.py:capital"]
    )
    with pytest.raises(ConfigError) as err:
        check_recipe(cfg)  # roll plan, --dry-run and roll train all make this check
    message = str(err.value)
    assert message.startswith("warmup.policy expert: the tool env's expert solves arithmetic")
    assert "not 'What is the capital of France?'" in message
    assert "set warmup=null" in message and "warmup.data=FILE" in message
    cfg, _ = load_recipe(
        "agentic-tool-math-agent", ["agentic.env_kwargs.tasks=my_tasks.py:capital", "warmup=null"]
    )
    check_recipe(cfg)  # RL alone: nothing to refuse


def test_warmup_steps_zero_is_no_warmup() -> None:
    cfg, _ = load_recipe("agentic-tool-math", ["warmup.steps=0"])
    assert cfg.warmup is None


def test_a_warmup_on_the_users_own_conversations(own_tasks, tmp_path) -> None:
    demo = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    (tmp_path / "demos.jsonl").write_text(json.dumps(demo) + "\n")
    cfg, _ = load_recipe(
        "agentic-tool-math-agent",
        ["agentic.env_kwargs.tasks=my_tasks.py:capital", "warmup.data=demos.jsonl"],
    )
    assert cfg.warmup.data == str(tmp_path / "demos.jsonl")  # resolved: resumes anywhere
    check_warmup(cfg)  # no expert needed
    assert warmup_episodes(cfg, tmp_path / "w", None, None) == tmp_path / "demos.jsonl"
    with pytest.raises(ConfigError, match=r"warmup.episodes chooses the episodes .* \(remove warm"):
        load_recipe("agentic-tool-math", ["warmup.data=demos.jsonl", "warmup.episodes=64"])
    cfg, _ = load_recipe("agentic-tool-math", ["warmup.data=none.jsonl"])
    with pytest.raises(
        ConfigError, match="warmup.data: no file 'none.jsonl'; give one, or set warmup=null"
    ):
        check_warmup(cfg)

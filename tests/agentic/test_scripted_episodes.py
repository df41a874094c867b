"""`roll data episodes`: scripted episodes in the RL chat format, read back by the SFT data
path, and equal to an episode replayed by hand on the env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.data_section import DataConfig
from rollcli.config.loader import load_recipe
from rollcli.data.offline_sets import load_chat_sets, tokenize_chats
from rollcli.envs.action_parsing import parse_action
from rollcli.envs.layout_split import layout_split
from rollcli.envs.registry import build_env
from rollcli.envs.sokoban.solver import solve
from rollcli.rollout.agentic_setup import env_kwargs
from rollcli.strategies.hf_model import load_tokenizer

runner = CliRunner()


def _episodes(tmp_path: Path, *args: str) -> list[dict]:
    out = tmp_path / "episodes.jsonl"
    result = runner.invoke(app, ["data", "episodes", *args, "model=tiny-random", "--out", str(out)])
    assert result.exit_code == 0, result.stderr + str(result.exception)
    assert f"to {out}" in result.stderr.replace("\n", "")
    return [json.loads(line) for line in out.read_text().splitlines()]


def _replay(recipe: str, row: dict, overrides: tuple[str, ...] = ()) -> tuple[list[dict], bool]:
    """The conversation an RL run of `recipe` shows for the row's seed and moves, built by
    hand from the env: instructions, observation, then per move the reply and the next
    user turn ("Reward r." and the observation)."""
    cfg, _ = load_recipe(recipe, ["model=tiny-random", *overrides])
    env = build_env(cfg.agentic.env, env_kwargs(cfg.agentic))
    obs, _ = env.reset(seed=int(row["id"].rsplit("seed", 1)[1]))
    messages = [{"role": "system", "content": env.instructions}, {"role": "user", "content": obs}]
    success = False
    for reply in [m["content"] for m in row["messages"] if m["role"] == "assistant"]:
        messages.append({"role": "assistant", "content": reply})
        obs, reward, terminated, truncated, info = env.step(reply)
        success = info["success"]
        if not (terminated or truncated):  # the env's max_steps is the recipe's max_turns
            messages.append({"role": "user", "content": f"Reward {reward:g}.\n{obs}"})
    return messages, success


def test_expert_frozenlake_episodes_load_as_sft_data_and_match_the_rl_format(
    tmp_path: Path, tiny_model: Path
) -> None:
    rows = _episodes(tmp_path, "frozenlake", "--n", "12", "--seed", "40")
    assert [r["id"] for r in rows] == [f"frozenlake-seed{s}" for s in range(40, 52)]
    for row in rows:
        expected, success = _replay("agentic-frozenlake", row)
        assert row["messages"] == expected
        assert success  # every expert episode reaches the goal
        replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert all(parse_action(r, ["Left", "Down", "Right", "Up"]).valid for r in replies)
    # the SFT pipeline's own loader and tokenizer read the file; every move is trained
    data = DataConfig(source="file", train_path=str(tmp_path / "episodes.jsonl"), val_size=2)
    train, val = load_chat_sets(data, seed=0)
    assert (len(train), len(val)) == (10, 2)
    tokenizer = load_tokenizer(tiny_model)
    samples, cut = tokenize_chats(tokenizer, train, max_tokens=1536)
    assert cut == 0
    for (ids, mask), example in zip(samples, train, strict=True):
        trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        moves = [m["content"] for m in example.messages if m["role"] == "assistant"]
        assert trained.count("</answer>") == len(moves) and "Reward" not in trained


def test_expert_sokoban_episodes_solve_their_training_levels(tmp_path: Path) -> None:
    overrides = ("agentic.max_turns=20",)
    rows = _episodes(tmp_path, "sokoban", *overrides, "--n", "8")
    cfg, _ = load_recipe("agentic-sokoban", ["model=tiny-random", *overrides])
    env = build_env("sokoban", env_kwargs(cfg.agentic))
    for row in rows:
        expected, success = _replay("agentic-sokoban", row, overrides)
        assert row["messages"] == expected and success
        env.reset(seed=int(row["id"].rsplit("seed", 1)[1]))
        moves = [m for m in row["messages"] if m["role"] == "assistant"]
        assert len(moves) == len(solve(env.state))  # a shortest solution
        assert layout_split(env.layout_key()) == "train"  # no validation level


def test_expert_webshop_episodes_buy_what_the_goal_asks(tmp_path: Path) -> None:
    # the oracle reads the goal, searches it, opens the best result, picks the options, buys
    overrides = ("agentic.env_kwargs.num_products=200",)
    rows = _episodes(tmp_path, "webshop", *overrides, "--n", "6")
    assert len(rows) == 6
    for row in rows:
        expected, success = _replay("webshop", row, overrides)
        assert row["messages"] == expected and success
        replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert (
            replies[0].startswith("<answer>search[")
            and replies[-1] == "<answer>click[buy now]</answer>"
        )


def test_random_episodes_take_legal_moves(tmp_path: Path) -> None:
    rows = _episodes(tmp_path, "frozenlake", "--policy", "random", "--n", "10")
    assert len(rows) == 10
    for row in rows:
        expected, _ = _replay("agentic-frozenlake", row)
        assert row["messages"] == expected


def test_an_env_without_an_expert_is_refused(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "no_expert_env.py").write_text(
        "from rollcli.envs.frozenlake import FrozenLakeEnv\n\n\n"
        "class NoExpert(FrozenLakeEnv):\n"
        "    @property\n"
        "    def expert_action(self):\n"
        "        raise AttributeError('expert_action')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "x.jsonl"
    args = ["frozenlake", "agentic.env=no_expert_env:NoExpert", "model=tiny-random"]
    result = runner.invoke(app, ["data", "episodes", *args, "--out", str(out)])
    assert result.exit_code == 2 and not out.exists()
    message = error_message(result.stderr)
    assert "'no_expert_env:NoExpert' has no expert policy; use --policy random" in message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["frozenlake", "--policy", "greedy"], "--policy 'greedy': choose one of expert, random"),
        (["frozenlake", "--seed", "999999", "--n", "5"], "seeds must stay below agentic.val_seed"),
        (["dpo"], "roll data episodes plays environments"),
    ],
)
def test_bad_requests_fail_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "x.jsonl"
    result = runner.invoke(app, ["data", "episodes", *args, "model=tiny-random", "--out", str(out)])
    assert result.exit_code == 2
    assert message in error_message(result.stderr)
    assert not out.exists()

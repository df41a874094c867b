"""`agentic.val_env`, the second validation env (cross-env transfer): its config, the env
arguments the pipeline passes, the worker role it adds, its metric names and what `roll logs`
shows of it; the paper recipes' env settings reach the envs."""

from __future__ import annotations

import pytest
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.loader import load_recipe
from rollcli.config.pipeline_spec import devices_key, roles_run
from rollcli.envs.registry import build_env
from rollcli.pipelines.rl.episodes import _validation_metrics
from rollcli.rollout.agentic_setup import cross_env_kwargs, env_kwargs
from rollcli.rollout.episode import Episode, EpisodeSpec
from rollcli.runs.log_tail import format_step

CROSS = ["agentic.val_env.env=sokoban", "agentic.val_env.env_kwargs.dim_room=[5,5]"]


def test_without_val_env_the_env_arguments_and_roles_are_as_before() -> None:
    cfg, _ = load_recipe("agentic-frozenlake", [])
    assert cfg.agentic.val_env is None
    assert env_kwargs(cfg.agentic, validation=True) == {
        "max_steps": 10, "size": 4, "p": 0.8, "is_slippery": False, "spaced_cells": True,
        "compact_instructions": True, "answer_pattern": r"<answer>\s*([A-Za-z]+)",
        "format_penalty": -0.1, "layouts": "validation",
    }  # fmt: skip
    assert roles_run(cfg) == ("actor_train", "actor_infer", "env", "env_val")


def test_val_env_takes_its_own_arguments_and_a_role_placed_with_the_envs() -> None:
    cfg, _ = load_recipe("agentic-frozenlake", CROSS)
    ag = cfg.agentic
    # the sokoban env's own kwargs, not frozenlake's size / p / is_slippery, with the
    # pipeline's keys (max_steps = max_turns, format penalty, validation layouts)
    assert cross_env_kwargs(ag) == {
        "max_steps": 10, "dim_room": [5, 5], "format_penalty": -0.1, "layouts": "validation",
    }  # fmt: skip
    assert build_env("sokoban", cross_env_kwargs(ag)).dim_room == (5, 5)
    assert roles_run(cfg)[-1] == "env_cross" and devices_key("env_cross") == "env"
    assert ag.val_env.label == "sokoban" and ag.val_env.episodes is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["agentic.val_env.env=sokobn"],
            "agentic.val_env.env = 'sokobn' is not a registered environment (did you mean "
            "'sokoban'?)",
        ),
        (
            [*CROSS, "agentic.val_env.name=tool_error"],
            "agentic.val_env.name = 'tool_error' cannot name metrics `val/<name>/...`",
        ),
        (
            [*CROSS, "agentic.val_env.env_kwargs.format_penalty=-1"],
            "set agentic.format_penalty, not agentic.val_env.env_kwargs.format_penalty",
        ),
    ],
)
def test_bad_val_envs_fail_in_one_line(overrides: list[str], message: str) -> None:
    res = CliRunner().invoke(app, ["train", "agentic-frozenlake", "--dry-run", *overrides])
    assert res.exit_code == 2, res.output
    line = error_message(res.stderr)
    assert message in line and "\n" not in line.strip()


def test_a_teaching_option_the_second_env_does_not_take_is_refused() -> None:
    from rollcli.config.errors import ConfigError

    cfg, _ = load_recipe(
        "agentic-frozenlake", ["agentic.val_env.env=tool", "agentic.shaping=progress"]
    )
    with pytest.raises(ConfigError, match="agentic.shaping applies to environments that take"):
        cross_env_kwargs(cfg.agentic)


def test_validation_metrics_of_the_second_env_carry_its_name() -> None:
    episodes = [
        Episode(EpisodeSpec(i, i, i), infos=[{"success": i == 0, "action_is_valid": True}])
        for i in range(4)
    ]
    m = _validation_metrics(episodes, "val/sokoban")
    assert m["val/sokoban/success_rate"] == m["val/sokoban/accuracy"] == 0.25
    assert m["val/sokoban/n"] == 4.0 and m["val/sokoban/accuracy_ci_low"] < 0.25
    assert not any(k.startswith("val/") and k.count("/") == 1 for k in m)  # val/* untouched
    line = format_step({"step": 0, "val/accuracy": 0.5, **m}, 10)
    assert line == "step  0/10  val acc 0.500  val sokoban 0.250  (before training)"


def test_the_paper_recipes_settings_reach_their_envs() -> None:
    cfg, _ = load_recipe("frozenlake-paper", ["agentic.env_kwargs.is_slippery=true"])
    assert build_env("frozenlake", env_kwargs(cfg.agentic)).is_slippery is True
    cfg, _ = load_recipe("sokoban-vocab-paper", [])
    env = build_env("sokoban", env_kwargs(cfg.agentic))
    assert (env.symbols.wall, env.symbols.player, env.symbols.player_on_target) == ("W", "A", "@")
    cfg, _ = load_recipe("sokoban-large-paper", [])
    env = build_env("sokoban", env_kwargs(cfg.agentic))
    assert (env.dim_room, env.num_boxes) == ((8, 8), 2)

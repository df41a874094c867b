"""The options every text env takes (`TextEnv`'s) reach it through the grid games' one
forwarding line (`text_env_options(locals())`), and their observation spaces follow from the
symbols and the room (`grid_space`)."""

from __future__ import annotations

import inspect

import pytest

from rollcli.envs.registry import make
from rollcli.envs.symbols import grid_space
from rollcli.envs.text_env import TEXT_ENV_OPTIONS, TextEnv, text_env_options

# a value other than the default for each option
GIVEN = {
    "max_steps": 7,
    "format_penalty": -0.5,
    "answer_pattern": r"<move>\s*(\w+)",
    "render_mode": None,
    "shaping": "progress",
    "shaping_gamma": 0.5,
    "no_effect_feedback": True,
    "no_effect_penalty": -0.2,
    "layouts": "train",
}


def test_the_options_are_textenvs_arguments() -> None:
    assert set(GIVEN) == set(TEXT_ENV_OPTIONS)
    assert tuple(inspect.signature(TextEnv.__init__).parameters)[1:] == TEXT_ENV_OPTIONS


@pytest.mark.parametrize("name", ["frozenlake", "sokoban"])
def test_each_option_reaches_the_text_env(name: str) -> None:
    env = make(name, **GIVEN)
    assert {key: getattr(env, key) for key in GIVEN} == GIVEN
    _, info = env.reset(seed=0)
    _, reward, *_, info = env.step("<answer>Up</answer>")  # not the <move> pattern: invalid
    assert info["action_is_valid"] is False and info["format_penalty"] == -0.5


@pytest.mark.parametrize("name", ["frozenlake", "sokoban"])
def test_every_option_is_named_in_the_env_signature(name: str) -> None:
    """What roll reads to know which env_kwargs an env takes (env_parameters)."""
    from rollcli.rollout.agentic_setup import env_parameters

    takes, open_kwargs = env_parameters(name)
    assert set(TEXT_ENV_OPTIONS) <= takes and not open_kwargs


def test_a_subclass_that_leaves_an_option_out_is_refused() -> None:
    with pytest.raises(TypeError, match="must take every TextEnv option; 'layouts' is missing"):
        text_env_options({key: GIVEN[key] for key in TEXT_ENV_OPTIONS if key != "layouts"})


@pytest.mark.parametrize(("name", "rows", "cols"), [("frozenlake", 4, 4), ("sokoban", 6, 6)])
def test_the_observation_space_is_the_grids(name: str, rows: int, cols: int) -> None:
    for spaced, length in (
        (False, rows * cols + rows - 1),
        (True, rows * (2 * cols - 1) + rows - 1),
    ):
        env = make(name, spaced_cells=spaced)
        assert env.observation_space.max_length == length
        assert env.observation_space == grid_space(env.symbols, rows, cols, spaced)
        obs, _ = env.reset(seed=3)
        assert len(obs) == length and env.observation_space.contains(obs)

"""The agentic keys that make environments teach, as the env receives them."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.envs.registry import build_env
from rollcli.rollout.agentic_setup import env_kwargs


def _kwargs(recipe: str, *overrides: str, validation: bool = False) -> dict:
    cfg, _ = load_recipe(recipe, list(overrides))
    return env_kwargs(cfg.agentic, validation=validation)


def test_off_by_default_nothing_extra_reaches_the_env() -> None:
    kwargs = _kwargs("agentic-frozenlake")
    assert not {"shaping", "shaping_gamma", "no_effect_feedback", "no_effect_penalty"} & set(kwargs)


def test_the_discount_of_shaping_is_the_runs() -> None:
    starpo = _kwargs("agentic-sokoban", "agentic.shaping=progress")
    assert (starpo["shaping"], starpo["shaping_gamma"]) == ("progress", 1.0)
    gigpo = _kwargs(
        "agentic-sokoban",
        "agentic.shaping=progress",
        "agentic.mode=gigpo",
        "agentic.step_gamma=0.8",
    )
    assert gigpo["shaping_gamma"] == 0.8
    env = build_env("sokoban", gigpo)
    assert (env.shaping, env.shaping_gamma) == ("progress", 0.8)


def test_feedback_and_penalty_reach_training_and_validation_envs() -> None:
    overrides = ("agentic.no_effect_feedback=true", "agentic.no_effect_penalty=-0.05")
    for validation in (False, True):
        kwargs = _kwargs("agentic-frozenlake", *overrides, validation=validation)
        env = build_env("frozenlake", kwargs)
        assert env.no_effect_feedback is True and env.no_effect_penalty == -0.05


def test_bad_or_inapplicable_keys_fail_with_what_to_do() -> None:
    with pytest.raises(ConfigError, match="agentic.shaping"):
        load_recipe("agentic-frozenlake", ["agentic.shaping=distance"])
    with pytest.raises(ConfigError, match="no_effect_penalty"):
        load_recipe("agentic-frozenlake", ["agentic.no_effect_penalty=0.5"])
    with pytest.raises(ConfigError, match="set agentic.shaping, not agentic.env_kwargs.shaping"):
        load_recipe("agentic-frozenlake", ["agentic.env_kwargs.shaping=progress"])
    with pytest.raises(ConfigError, match="shaping_gamma is the run's discount"):
        load_recipe("agentic-frozenlake", ["agentic.env_kwargs.shaping_gamma=0.5"])
    with pytest.raises(ConfigError, match=r"take it \(frozenlake, sokoban\); 'webshop' does not"):
        _kwargs("webshop", "agentic.shaping=progress")
    assert _kwargs("webshop", "agentic.no_effect_penalty=-0.1")["no_effect_penalty"] == -0.1

"""The plugins a recipe names are checked before anything starts, by the pre-launch checks
(rollcli/launch/plugin_check.py), not by config, which imports no plugin: each reward
declares its options, and an unknown or mistyped `reward.options` key fails with the closest
declared one (issue #22, item 5); a mix route names a reward; an env is registered or a
factory that imports; `agentic.val_env.env` is registered."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.recipe import RecipeConfig
from rollcli.launch.plugin_check import check_plugins


def checked(recipe: str, overrides: list[str]) -> RecipeConfig:
    """The recipe as `roll train` would start it: loaded, then its plugins checked."""
    cfg, _ = load_recipe(recipe, overrides)
    check_plugins(cfg)
    return cfg


def test_a_misspelled_option_is_an_error_with_did_you_mean():
    with pytest.raises(ConfigError) as info:
        checked("rlvr-code", ["reward.options.max_worker=2"])
    assert str(info.value) == (
        "unknown key 'reward.options.max_worker' (did you mean "
        "'reward.options.max_workers'?); the code reward's options: max_workers, memory_mb, "
        "allow_weak_isolation, test_format"
    )


def test_an_option_of_the_wrong_type_is_an_error():
    with pytest.raises(ConfigError, match=r"reward.options.memory_mb = 'lots': Input should"):
        checked("rlvr-code", ["reward.options.memory_mb=lots"])


def test_declared_options_load():
    cfg = checked("rlvr-code", ["reward.options.max_workers=2"])
    assert cfg.reward.options == {"max_workers": 2}
    cfg = checked("rlvr-math", ["reward.options.format_weight=0.2"])
    assert cfg.reward.worker_options["format_weight"] == 0.2


def test_mix_checks_each_route_and_the_shared_options():
    with pytest.raises(ConfigError, match=r"unknown key 'reward.route_options.code.format_weight'"):
        checked("rlvr-mix", ["reward.route_options.code.format_weight=2"])
    with pytest.raises(ConfigError, match=r"did you mean 'reward.options.format_weight'"):
        checked("rlvr-mix", ["reward.options.format_weigth=0.2"])
    checked("rlvr-mix", ["reward.options.format_weight=0.2"])  # math takes it


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ("cod", "reward.routes.code = 'cod' is not a built-in reward (did you mean 'code'?) nor"),
        ("mix", "reward.routes.code = 'mix' is not a built-in reward nor"),  # nor mix again
    ],
)
def test_a_mix_route_names_a_built_in_reward_or_user_code(route: str, message: str) -> None:
    cfg, _ = load_recipe("rlvr-mix", [f"reward.routes.code={route}"])  # config: the shape only
    with pytest.raises(ConfigError) as err:
        check_plugins(cfg)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_user_code_is_not_imported_at_load():
    cfg, _ = load_recipe("rlvr-math", ["reward.fn=not_installed.mod:fn", "reward.options.k=1"])
    assert cfg.reward.options == {"k": 1}


def test_a_declaration_must_name_real_parameters():
    from rollcli.rewards.registry import option_types, reward_options

    def scaled(response, answer, *, scale: float = 1.0, **fields):
        return scale

    assert option_types(reward_options("scale")(scaled)) == {"scale": float}
    with pytest.raises(TypeError, match="declares option 'scael'"):
        reward_options("scael")(scaled)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("no_such_module_x:make", "cannot import 'no_such_module_x'"),
        ("json:no_factory", "agentic.env = 'json:no_factory': json has no 'no_factory'"),
        ("json:__doc__", "agentic.env = 'json:__doc__' is not a class or function"),
        ("frozenlak", "not a registered environment (did you mean 'frozenlake'?)"),
    ],
)
def test_agentic_env_names_a_registered_env_or_an_importable_factory(env, message) -> None:
    cfg, _ = load_recipe("agentic-frozenlake", [f"agentic.env={env}"])  # config: the shape only
    with pytest.raises(ConfigError) as err:
        check_plugins(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_second_validation_env_is_a_registered_one() -> None:
    cfg, _ = load_recipe("agentic-frozenlake", ["agentic.val_env.env=sokobn"])
    with pytest.raises(ConfigError) as err:
        check_plugins(cfg)
    assert str(err.value).startswith(
        "agentic.val_env.env = 'sokobn' is not a registered environment (did you mean "
        "'sokoban'?); choose one of frozenlake, sokoban, tool, webshop"
    )
    checked("agentic-frozenlake", ["agentic.val_env.env=sokoban"])  # a registered one passes

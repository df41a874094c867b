"""Each reward declares its options; an unknown or mistyped `reward.options` key fails at
load with the closest declared one (issue #22, item 5)."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe


def test_a_misspelled_option_is_an_error_with_did_you_mean():
    with pytest.raises(ConfigError) as info:
        load_recipe("rlvr-code", ["reward.options.max_worker=2"])
    assert str(info.value) == (
        "rlvr-code: unknown key 'reward.options.max_worker' (did you mean "
        "'reward.options.max_workers'?); the code reward's options: max_workers, memory_mb, "
        "allow_weak_isolation, test_format"
    )


def test_an_option_of_the_wrong_type_is_an_error():
    with pytest.raises(ConfigError, match=r"reward.options.memory_mb = 'lots': Input should"):
        load_recipe("rlvr-code", ["reward.options.memory_mb=lots"])


def test_declared_options_load():
    cfg, _ = load_recipe("rlvr-code", ["reward.options.max_workers=2"])
    assert cfg.reward.options == {"max_workers": 2}
    cfg, _ = load_recipe("rlvr-math", ["reward.options.format_weight=0.2"])
    assert cfg.reward.worker_options["format_weight"] == 0.2


def test_mix_checks_each_route_and_the_shared_options():
    with pytest.raises(ConfigError, match=r"unknown key 'reward.route_options.code.format_weight'"):
        load_recipe("rlvr-mix", ["reward.route_options.code.format_weight=2"])
    with pytest.raises(ConfigError, match=r"did you mean 'reward.options.format_weight'"):
        load_recipe("rlvr-mix", ["reward.options.format_weigth=0.2"])
    load_recipe("rlvr-mix", ["reward.options.format_weight=0.2"])  # math takes it


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

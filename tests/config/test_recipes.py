"""Recipes load, validate and fail with one readable line."""

from __future__ import annotations

import pytest

from rollcli.config.catalogue import catalogue, find_recipe
from rollcli.config.errors import ConfigError
from rollcli.config.loader import (
    apply_overrides,
    dump_recipe,
    load_recipe,
    parse_override,
    validate_recipe,
)


@pytest.mark.parametrize("name", [e.name for e in catalogue()])
def test_every_recipe_in_the_catalogue_validates(name: str) -> None:
    cfg, source = load_recipe(name)
    assert cfg.name == name and source == name


def test_catalogue_names_the_recipes_users_asked_for() -> None:
    names = {e.name for e in catalogue()}
    assert {
        "rlvr-math",
        "agentic-sokoban",
        "webshop",
        "dpo",
        "distill",
        "sft",
        "rlvr-code",
        "agentic-frozenlake",
        "agentic-tool-math",
    } <= names


def test_recipe_found_by_alias_and_unique_prefix() -> None:
    assert find_recipe("rlvr")[0] == "rlvr-math"
    assert find_recipe("agentic-s")[0] == "agentic-sokoban"
    assert find_recipe("tool-math")[0] == "agentic-tool-math"  # the name itself, not a prefix
    assert find_recipe("agentic-tool-math")[0] == "agentic-tool-math"
    assert find_recipe("agentic-tool-math-a")[0] == "agentic-tool-math-agent"
    # a name that is also the prefix of another is that recipe, not an ambiguity
    assert find_recipe("agentic-frozenlake")[0] == "agentic-frozenlake"
    with pytest.raises(
        ConfigError,
        match="ambiguous: it matches agentic-frozenlake, agentic-frozenlake-slippery, "
        "agentic-sokoban",
    ):
        find_recipe("agentic")
    with pytest.raises(ConfigError, match="did you mean 'rlvr-math'"):
        find_recipe("rlvr-mth")


def test_unknown_key_names_the_path_and_the_closest_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe("rlvr-math", ["train.lrr=1e-5"])
    assert str(err.value) == "rlvr-math: unknown key 'train.lrr' (did you mean 'train.lr'?)"


def test_unknown_algorithm_knob_and_preset_have_did_you_mean() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown key 'algorithm.clip_hgh' \(did you mean 'algorithm.clip_high'\?\)",
    ):
        load_recipe("rlvr-math", ["algorithm.clip_hgh=0.3"])
    with pytest.raises(ConfigError, match="did you mean 'grpo'"):
        load_recipe("rlvr-math", ["algorithm.name=grpoo"])


def test_bad_type_names_key_and_value() -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe("rlvr-math", ["train.lr=abc"])
    assert "train.lr = 'abc'" in str(err.value) and "valid number" in str(err.value)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("rollout.batch_size=-4", "rollout.batch_size = -4: Input should be greater than 0"),
        ("rollout.group_size=1", "needs group_size >= 2"),
        (
            "rollout.batch_size=42",
            "rollout.batch_size = 42 is not divisible by rollout.group_size = 5",
        ),
        (
            "train.mini_batch_size=24",
            "train.mini_batch_size = 24 does not divide rollout.batch_size = 40",
        ),
        ("algorithm.dual_clip=0.5", "algorithm.dual_clip = 0.5"),
    ],
)
def test_impossible_values_fail_before_anything_starts(override: str, expected: str) -> None:
    with pytest.raises(ConfigError, match="^rlvr-math: ") as err:
        load_recipe("rlvr-math", [override])
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_overrides_and_flags_apply_in_order() -> None:
    cfg, _ = load_recipe(
        "rlvr-math",
        ["train.lr=3e-6", "rollout.temperature=0.7"],
        {"train.steps": 4, "model": "tiny-random"},
    )
    assert cfg.train.lr == pytest.approx(3e-6)
    assert cfg.rollout.temperature == pytest.approx(0.7)
    assert cfg.train.steps == 4 and cfg.model == "tiny-random"


def test_preset_sets_defaults_and_user_keys_win() -> None:
    cfg, _ = load_recipe("rlvr-math", ["algorithm.name=ppo"])
    assert cfg.algorithm.advantage == "gae" and cfg.needs_critic
    cfg, _ = load_recipe("rlvr-math", ["algorithm.name=ppo", "algorithm.lam=0.9"])
    assert cfg.algorithm.lam == pytest.approx(0.9)


def test_override_syntax_errors() -> None:
    assert parse_override("a.b=[1, 2]") == (["a", "b"], [1, 2])
    with pytest.raises(ConfigError, match="key.path=value"):
        parse_override("train.lr")
    with pytest.raises(ConfigError, match="is a value, not a section"):
        apply_overrides({"model": "x"}, ["model.name=y"])


def test_resolved_recipe_round_trips(tmp_path) -> None:
    cfg, _ = load_recipe("rlvr-math", ["train.steps=3"])
    path = tmp_path / "resolved.yaml"
    path.write_text(dump_recipe(cfg))
    again, _ = load_recipe(str(path))
    assert again == cfg


def test_a_recipe_file_with_bad_yaml_names_the_line(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\npipeline: rlvr\ntrain: {steps: 3\n")
    with pytest.raises(ConfigError, match="bad.yaml: line"):
        load_recipe(str(path))


def test_validate_rejects_non_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        validate_recipe(["a", "b"])


def test_agentic_takes_async_rollout_and_its_correction() -> None:
    cfg, _ = load_recipe(
        "agentic-sokoban", ["rollout.max_staleness=1", "algorithm.off_policy.correction=tis"]
    )
    assert cfg.rollout.max_staleness == 1 and cfg.algorithm.off_policy.correction == "tis"
    with pytest.raises(ConfigError, match="^agentic-sokoban: algorithm.dynamic_sampling") as err:
        load_recipe("agentic-sokoban", ["algorithm.dynamic_sampling=true"])
    assert "\n" not in str(err.value)


# A knob that tunes a feature the recipe leaves off would be ignored: refused in every RL
# pipeline, one line naming it.
TUNES_WHAT_IS_OFF = [
    (["algorithm.lam=0.9"], "algorithm.lam = 0.9 is GAE's lambda, and advantage 'grpo'"),
    (["algorithm.value_clip=0.2"], "value_clip needs a critic"),
    (
        ["algorithm.kl_controller=adaptive", "algorithm.kl_in=loss", "algorithm.kl_coef=0.01"],
        "algorithm.kl_controller = adaptive sets the coefficient of a KL in the reward",
    ),
    (["algorithm.kl_target=1.0"], "algorithm.kl_target / kl_horizon tune kl_controller"),
    (["algorithm.kl_horizon=100"], "algorithm.kl_target / kl_horizon tune kl_controller"),
    (["algorithm.max_resample_rounds=5"], "algorithm.max_resample_rounds tunes dynamic sampling"),
    (["algorithm.overlong_penalty=0.5"], "algorithm.overlong_penalty = 0.5 applies within"),
]


@pytest.mark.parametrize("recipe", ["rlvr-math", "agentic-frozenlake"])
@pytest.mark.parametrize(("overrides", "expected"), TUNES_WHAT_IS_OFF)
def test_a_knob_of_a_feature_that_is_off_is_refused(recipe, overrides, expected) -> None:
    with pytest.raises(ConfigError, match=f"^{recipe}: ") as err:
        load_recipe(recipe, overrides)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_the_same_knobs_load_with_their_feature_on() -> None:
    cfg, _ = load_recipe(
        "rlvr-math",
        [
            "algorithm.kl_controller=adaptive",
            "algorithm.kl_in=reward",
            "algorithm.kl_target=1.0",
            "algorithm.kl_horizon=100",
            "algorithm.dynamic_sampling=true",
            "algorithm.max_resample_rounds=5",
            "algorithm.overlong_buffer=0.2",
            "algorithm.overlong_penalty=0.5",
        ],
    )
    alg = cfg.algorithm
    assert (alg.kl_target, alg.kl_horizon, alg.max_resample_rounds) == (1.0, 100, 5)
    assert alg.overlong_penalty == 0.5

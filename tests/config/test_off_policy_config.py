"""`algorithm.off_policy`: one setting for the sampler-vs-trainer correction, each key that
cannot apply refused in one line."""

from __future__ import annotations

import pytest
import yaml

from rollcli.config.presets import resolve_algorithm


def test_default_is_auto_with_the_documented_cap_and_band() -> None:
    off = resolve_algorithm().off_policy
    assert (off.correction, off.level, off.cap, off.band) == ("auto", "token", 2.0, (0.5, 2.0))


@pytest.mark.parametrize(
    ("precision", "user", "applied"),
    [
        ("int8", {}, "tis"),  # a low-precision rollout: tis (the learning suite's choice)
        ("bf16", {}, "tis"),
        ("fp8", {}, "tis"),
        ("fp32", {}, "none"),
        ("auto", {}, "none"),  # the engine's own precision: the trainer's on CPU
        ("int8", {"policy_loss": "pg"}, "none"),  # pg and topr: a correction when named
        ("int8", {"policy_loss": "topr"}, "none"),
        ("fp32", {"policy_loss": "pg", "off_policy": {"correction": "tis"}}, "tis"),
        ("int8", {"off_policy": {"correction": "none"}}, "none"),  # a named one is kept
        ("fp32", {"off_policy": {"correction": "icepop"}}, "icepop"),
    ],
)
def test_auto_picks_tis_for_a_low_precision_rollout(precision, user, applied) -> None:
    from rollcli.config.algorithm import resolved_correction

    assert resolved_correction(resolve_algorithm(user), precision) == applied


def test_a_recipe_runs_with_the_resolved_correction() -> None:
    """What the actor's update receives, from a recipe with an int8 rollout (the policy
    update's arguments; the refusal of a biased engine is test_tis_engine_plan.py's)."""
    from rollcli.config.loader import load_recipe
    from rollcli.pipelines.rl.update_args import update_args

    fp32, _ = load_recipe("rlvr-math")
    int8, _ = load_recipe("rlvr-math", ["rollout.precision=int8", "rollout.engine=hf"])
    assert (update_args(fp32).correction, update_args(int8).correction) == ("none", "tis")


def test_each_correction_and_level_resolves() -> None:
    mis = resolve_algorithm({"off_policy": {"correction": "mis", "level": "sequence", "cap": 3}})
    assert mis.off_policy.level == "sequence" and mis.off_policy.cap == 3.0
    ice = resolve_algorithm({"off_policy": {"correction": "icepop", "band": [0.5, 5.0]}})
    assert ice.off_policy.band == (0.5, 5.0)


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"off_policy": {"correction": "icepop", "cap": 3.0}}, "cap applies to correction tis"),
        ({"off_policy": {"correction": "none", "cap": 3.0}}, "cap applies to correction tis"),
        ({"off_policy": {"cap": 3.0}}, "correction: auto picks one only for a low-precision"),
        ({"off_policy": {"level": "sequence"}}, "name it, e.g. correction: tis"),
        ({"off_policy": {"correction": "icepop", "level": "sequence"}}, "level: sequence"),
        ({"off_policy": {"band": [1.5, 3.0]}}, "0 < low <= 1 <= high"),
        ({"off_policy": {"correction": "mis", "policy_loss": "pg"}}, "Extra inputs"),
        ({"off_policy": {"correction": "tis"}, "policy_loss": "topr"}, "use mis or icepop"),
        ({"tis_cap": 2.0}, "algorithm.off_policy.correction=tis algorithm.off_policy.cap=2.0"),
    ],
)
def test_inapplicable_keys_are_refused(user, message) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_algorithm(user)


def test_a_run_saved_before_the_rename_still_loads() -> None:
    """Its recipe.yaml wrote `tis_cap: null` (off); it resumes with no correction."""
    from rollcli.config.loader import dump_recipe, load_recipe, validate_recipe

    cfg, _ = load_recipe("rlvr-math")
    raw = yaml.safe_load(dump_recipe(cfg))
    raw["algorithm"]["tis_cap"] = None
    del raw["algorithm"]["off_policy"]
    old = validate_recipe(raw)
    assert old.algorithm.off_policy.correction == "none"


@pytest.mark.parametrize(
    ("overrides", "correction"),
    [
        # each way a batch is off-policy: later epochs, async rollout, a low-precision engine
        (["algorithm.policy_loss=pg", "algorithm.ppo_epochs=2"], "tis"),
        (["algorithm.policy_loss=pg", "rollout.max_staleness=1"], "mis"),
        (["algorithm.policy_loss=pg", "rollout.precision=int8", "rollout.engine=hf"], "icepop"),
        (["algorithm.name=topr", "algorithm.ppo_epochs=2"], "mis"),
        (["algorithm.name=topr", "rollout.precision=int8", "rollout.engine=hf"], "icepop"),
    ],
)
def test_pg_and_topr_take_a_named_correction(overrides, correction) -> None:
    """Refused before (no loss but ppo, gspo and raftpp took one); the update now receives
    it, with the ratio to the sampler (tests/algorithms/test_sampler_ratio_losses.py)."""
    from rollcli.config.loader import load_recipe
    from rollcli.pipelines.rl.update_args import update_args

    cfg, _ = load_recipe("rlvr-math", [*overrides, f"algorithm.off_policy.correction={correction}"])
    assert update_args(cfg).correction == correction


def test_tis_with_topr_is_refused_in_one_line_naming_the_ones_that_apply() -> None:
    from rollcli.config.errors import ConfigError
    from rollcli.config.loader import load_recipe

    with pytest.raises(ConfigError) as err:
        load_recipe("rlvr-math", ["algorithm.name=topr", "algorithm.off_policy.correction=tis"])
    message = str(err.value)
    assert "\n" not in message and "topr" in message and "use mis or icepop" in message

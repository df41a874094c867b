"""`algorithm.off_policy`: one setting for the sampler-vs-trainer correction, each key that
cannot apply refused in one line."""

from __future__ import annotations

import pytest
import yaml

from rollcli.config.presets import resolve_algorithm


def test_default_is_no_correction_with_the_documented_cap_and_band() -> None:
    off = resolve_algorithm().off_policy
    assert (off.correction, off.level, off.cap, off.band) == ("none", "token", 2.0, (0.5, 2.0))


def test_each_correction_and_level_resolves() -> None:
    mis = resolve_algorithm({"off_policy": {"correction": "mis", "level": "sequence", "cap": 3}})
    assert mis.off_policy.level == "sequence" and mis.off_policy.cap == 3.0
    ice = resolve_algorithm({"off_policy": {"correction": "icepop", "band": [0.5, 5.0]}})
    assert ice.off_policy.band == (0.5, 5.0)


@pytest.mark.parametrize(
    ("user", "message"),
    [
        ({"off_policy": {"correction": "icepop", "cap": 3.0}}, "cap applies to correction tis"),
        ({"off_policy": {"cap": 3.0}}, "cap applies to correction tis or mis, not 'none'"),
        ({"off_policy": {"correction": "icepop", "level": "sequence"}}, "level: sequence"),
        ({"off_policy": {"band": [1.5, 3.0]}}, "0 < low <= 1 <= high"),
        ({"off_policy": {"correction": "mis", "policy_loss": "pg"}}, "Extra inputs"),
        ({"off_policy": {"correction": "mis"}, "policy_loss": "topr"}, "not 'topr'"),
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

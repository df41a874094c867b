"""`algorithm.router_replay` is checked against the model and the engine before a run starts,
and `roll plan` / `--dry-run` say what an MoE run replays."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import auto_lines, recipe_plan_input


def _cfg(**sets):
    return load_recipe("rlvr-math", [], {"model": "tiny-random-moe", **sets})[0]


def test_off_from_yaml_is_off():
    assert _cfg(**{"algorithm.router_replay": False}).algorithm.router_replay == "off"


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        ({"model": "tiny-random", "algorithm.router_replay": "R3"}, "has no MoE layers"),
        ({"algorithm.router_replay": "R3", "resources.gpus": 8}, "R3: the vllm engine"),
        ({"algorithm.router_replay": "R2", "train.shared_prefix": True}, "shared_prefix=false"),
    ],
)
def test_a_replay_that_cannot_apply_is_refused_before_the_run(sets, message):
    with pytest.raises(ConfigError, match=message):
        recipe_plan_input(_cfg(**sets))


def test_r2_plans_with_any_engine_and_dense_models_plan_with_off():
    recipe_plan_input(_cfg(**{"algorithm.router_replay": "R2", "resources.gpus": 8}))
    recipe_plan_input(_cfg(model="tiny-random"))


def test_the_plan_says_what_an_moe_run_replays():
    lines = auto_lines(_cfg(**{"algorithm.router_replay": "R3"}))
    want = "MoE (2 of 4 experts per token): router_replay R3, the hf engine's experts replayed"
    assert want in lines
    off = next(x for x in auto_lines(_cfg(**{"resources.gpus": 8})) if x.startswith("MoE"))
    assert "R3 needs rollout.engine=hf" in off
    assert not any(x.startswith("MoE") for x in auto_lines(_cfg(model="tiny-random")))

"""The run's plan (`planning/run_plan.py`), made once by `roll train`'s pre-launch check and
handed down to its control and workers: the plan `roll plan` prints, with the request it
was made from, or one line refusing a run that cannot fit."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import plan_recipe, recipe_plan_input
from rollcli.planning.run_plan import plan_run


def test_the_run_plan_is_the_one_roll_plan_prints_with_its_request() -> None:
    cfg = load_recipe("rlvr-math", ["train.strategy=hf", "resources.num_cpus=2"])[0]
    run = plan_run(cfg)
    assert run.plan.to_json() == plan_recipe(cfg).to_json()
    assert run.request == recipe_plan_input(cfg)
    per_rank = run.planned_per_rank()
    assert set(per_rank) <= {w.role for w in run.plan.workers}  # a started role each
    assert {"actor_train", "actor_infer", "reference"} <= set(per_rank)
    # training holds gradients and Adam states beside the weights: more than a forward role
    assert per_rank["actor_train"] > per_rank["reference"] > 0


def test_a_run_that_cannot_fit_is_refused_in_one_line_with_the_advice() -> None:
    cfg = load_recipe(
        "rlvr-math", ["train.strategy=hf"], {"model": "qwen2.5-7b", "resources.gpus": 8}
    )[0]
    with pytest.raises(ConfigError) as err:
        plan_run(cfg)
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith("the plan for qwen2.5-7b on 8 GPU(s) does not fit: ")
    assert ". what to change: " in line
    assert line.endswith("`roll plan rlvr-math --model qwen2.5-7b --gpus 8` shows the whole plan")

"""The clusters `build_clusters` starts for real (Ray, tiny-random) are the workers `roll plan`
prints: the same roles in the same order (each of the worker table's class), ranks, the Ray CPUs each actor
holds and the torch threads each process runs with."""

from __future__ import annotations

import json

import pytest
from planned_workers import assert_clusters_are_planned
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.loader import load_recipe
from rollcli.planning.role_table import roles_for
from rollcli.planning.run_plan import plan_run
from rollcli.runtime.workers_setup import Placement, build_clusters

CASES = {
    "rlvr": ("rlvr-math", ["rollout.num_workers=2", "algorithm.advantage=gae"]),
    "agentic": ("agentic-frozenlake", ["algorithm.kl_coef=0.01", "agentic.num_env_workers=1"]),
    "distill": ("distill", []),
}
# 1 to 11 min each on the shared 2-core machine under load. The rlvr plan (five roles, two
# engine ranks) is checked by default on the clusters a ppo run starts (tests/e2e/test_presets.py)
SLOW = {"rlvr", "agentic", "distill"}


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in CASES]
)
def test_built_clusters_are_the_planned_workers(case: str, tiny_model) -> None:
    recipe, overrides = CASES[case]
    overrides = [*overrides, "resources.num_cpus=2"]
    res = CliRunner().invoke(
        app, ["plan", recipe, *overrides, "--model", str(tiny_model), "--json"]
    )
    assert res.exit_code == 0, res.output
    planned = json.loads(res.output)["workers"]
    cfg, _ = load_recipe(recipe, overrides, {"model": str(tiny_model)})
    student = str(tiny_model) if cfg.pipeline == "distill" else None
    placement = Placement.build(cfg, plan_run(cfg))
    clusters = build_clusters(
        cfg, roles_for(cfg), placement, model_path=str(tiny_model), student_path=student
    )
    try:
        assert_clusters_are_planned(clusters, planned, cfg.pipeline)
    finally:
        clusters.kill()
    # the roles as planned by hand: model roles share 2 cores (less the light roles' slivers)
    expected = {
        "rlvr": [("actor_train", 1), ("actor_infer", 2), ("reference", 1), ("critic", 1),
                 ("reward", 1)],
        "agentic": [("actor_train", 1), ("actor_infer", 1), ("reference", 1), ("env", 1),
                    ("env_val", 1)],
        "distill": [("actor_train", 1), ("teacher", 1)],
    }  # fmt: skip
    assert [(w["role"], w["ranks"]) for w in planned] == expected[case]

"""The role table: the roles each recipe runs, as `roll plan` shows them, their CPU sizing
(against hand computations), the fault-point map derived from it, and `devices.<role>` keys
for roles a recipe does not run."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.catalogue import catalogue
from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import plan_recipe
from rollcli.planning.role_table import TABLE, roles_for
from rollcli.runs.faults import POINTS, fault_roles

# recipe, overrides -> the roles it runs, by hand from the recipe
MATRIX = {
    ("rlvr-math", ()): ["actor_train", "actor_infer", "reference", "reward"],
    ("rlvr-math", ("algorithm.kl_coef=0",)): ["actor_train", "actor_infer", "reward"],
    ("rlvr-math", ("algorithm.advantage=gae",)): [
        "actor_train", "actor_infer", "reference", "critic", "reward",
    ],
    ("rlvr-math-lora", ()): ["actor_train", "actor_infer", "reward"],
    ("rlvr-math-moe", ()): ["actor_train", "actor_infer", "reference", "reward"],
    ("rlvr-code", ()): ["actor_train", "actor_infer", "reference", "reward"],
    ("rlvr-gsm8k", ()): ["actor_train", "actor_infer", "reference", "reward"],
    ("rlvr-mix", ()): ["actor_train", "actor_infer", "reference", "reward"],
    ("rlvr-paper", ()): ["actor_train", "actor_infer", "reward"],  # no KL: no reference
    ("agentic-frozenlake", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("agentic-frozenlake", ("algorithm.kl_coef=0.01",)): [
        "actor_train", "actor_infer", "reference", "env", "env_val",
    ],
    ("agentic-frozenlake-slippery", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("agentic-sokoban", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("agentic-tool-math", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("agentic-tool-math-agent", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("webshop", ()): ["actor_train", "actor_infer", "env", "env_val"],
    ("webshop-paper", ()): ["actor_train", "actor_infer", "env", "env_val"],
    # agentic.val_env: the second validation env's workers
    ("sokoban-paper", ()): ["actor_train", "actor_infer", "env", "env_val", "env_cross"],
    ("sokoban-large-paper", ()): [
        "actor_train", "actor_infer", "env", "env_val", "env_cross",
    ],
    ("sokoban-vocab-paper", ()): [
        "actor_train", "actor_infer", "env", "env_val", "env_cross",
    ],
    ("frozenlake-paper", ()): [
        "actor_train", "actor_infer", "env", "env_val", "env_cross",
    ],
    ("dpo", ()): ["actor_train", "reference"],
    ("dpo", ("train.lora.r=8",)): ["actor_train"],
    ("sft", ()): ["actor_train"],
    ("distill", ()): ["actor_train", "teacher"],
    ("distill", ("train.lora.r=8",)): ["actor_train", "teacher"],
    ("distill-on-policy", ()): ["actor_train", "teacher"],
}  # fmt: skip
runner = CliRunner()


def test_the_matrix_covers_every_shipped_recipe() -> None:
    assert {name for name, _ in MATRIX} == {entry.name for entry in catalogue()}


@pytest.mark.parametrize(("recipe", "overrides"), list(MATRIX), ids=lambda v: str(v))
def test_roll_plan_shows_the_roles_of_the_table(recipe: str, overrides: tuple) -> None:
    cfg, _ = load_recipe(recipe, list(overrides))
    assert [r.name for r in roles_for(cfg)] == MATRIX[recipe, overrides]
    res = runner.invoke(app, ["plan", recipe, *overrides, "--json"])
    plan = json.loads(res.output)
    workers = plan["workers"]
    assert [w["role"] for w in workers] == MATRIX[recipe, overrides]
    assert {r for d in plan["devices"] for r in d["roles"]} == set(MATRIX[recipe, overrides])
    for w, role in zip(workers, roles_for(cfg), strict=True):
        assert w["ranks"] == role.ranks
    # the workers fit the cores Ray is given (resources.num_cpus, else this machine's)
    cores = cfg.resources.num_cpus or os.cpu_count()
    assert sum(sum(w["num_cpus"]) for w in workers) <= cores + 1e-9


def test_cpu_sizing_by_hand() -> None:
    """4 cores; light roles first: 3 reward workers x 0.1 = 0.3; the 4 model ranks
    (actor_train, 2 x actor_infer, reference) share 3.7 -> 0.925 each; threads: 4 cores,
    split between a role's own ranks."""
    cfg, _ = load_recipe(
        "rlvr-math", ["resources.num_cpus=4", "rollout.num_workers=2", "reward.num_workers=3"]
    )
    got = {w.role: (w.num_cpus, w.threads) for w in plan_recipe(cfg).workers}
    assert got == {
        "actor_train": ((0.925,), 4),
        "actor_infer": ((0.925, 0.925), 2),
        "reference": ((0.925,), 4),
        "reward": ((0.1, 0.1, 0.1), None),
    }
    cfg, _ = load_recipe(
        "agentic-frozenlake", ["resources.num_cpus=2", "agentic.num_env_workers=3"]
    )
    got = {w.role: (w.num_cpus, w.threads) for w in plan_recipe(cfg).workers}
    # 6 env workers x 0.05 = 0.3; actor_train and actor_infer share 1.7
    assert got == {
        "actor_train": ((0.85,), 2),
        "actor_infer": ((0.85,), 2),
        "env": ((0.05,) * 3, None),
        "env_val": ((0.05,) * 3, None),
    }


def test_gpu_workers_follow_the_plan_and_the_critic_keeps_one_rank() -> None:
    """2 GPUs, every model role on both: each GPU is shared by 4 roles (1/4 each, so 0.25
    of its bundle's CPU); the critic runs one rank (its update is not data parallel)."""
    cfg, _ = load_recipe(
        "rlvr-math", ["algorithm.advantage=gae", "model=qwen2.5-0.5b", "resources.gpus=2"]
    )
    got = {w.role: (w.num_cpus, w.gpus) for w in plan_recipe(cfg).workers}
    assert got["actor_train"] == got["actor_infer"] == got["reference"] == ((0.25,) * 2,) * 2
    assert got["critic"] == ((0.25,), (0.25,))
    assert got["reward"] == ((0.1,), (0.0,))  # on the host


def test_fault_points_map_to_roles_the_recipe_runs() -> None:
    """Every point of every recipe kills a worker the run has; every role of the table that
    claims a point is killed by it in some recipe (env workers claim none: no phase runs
    on them alone)."""
    killed = set()
    for recipe, overrides in MATRIX:
        cfg, _ = load_recipe(recipe, list(overrides))
        roles = roles_for(cfg)
        targets = fault_roles(roles)
        assert set(targets) == set(POINTS)
        assert set(targets.values()) <= {r.name for r in roles}
        killed |= set(targets.values())
    assert killed == {r.name for r in TABLE if r.faults}
    assert {r.name for r in TABLE if not r.faults} == {"critic", "env", "env_val", "env_cross"}


@pytest.mark.parametrize(
    ("recipe", "overrides", "forward", "generate", "reward"),
    [
        ("rlvr-math", (), "reference", "actor_infer", "reward"),
        ("rlvr-math-lora", (), "actor_train", "actor_infer", "reward"),
        ("agentic-frozenlake", (), "actor_train", "actor_infer", "actor_train"),
        ("dpo", (), "reference", "actor_train", "actor_train"),
        ("dpo", ("train.lora.r=8",), "actor_train", "actor_train", "actor_train"),
        ("distill", (), "teacher", "actor_train", "actor_train"),
    ],
)
def test_fault_roles_by_hand(recipe, overrides, forward, generate, reward) -> None:
    cfg, _ = load_recipe(recipe, list(overrides))
    targets = fault_roles(roles_for(cfg))
    assert (targets["forward"], targets["generate"], targets["reward"]) == (
        forward,
        generate,
        reward,
    )
    assert targets["train"] == targets["sync"] == targets["checkpoint"] == "actor_train"


def test_a_devices_key_of_a_role_the_recipe_does_not_run_is_refused() -> None:
    cfg, _ = load_recipe("distill", ["devices.reference.device_mapping=cpu"])
    with pytest.raises(ConfigError, match=r"devices.reference: .* runs no reference role .*"):
        plan_recipe(cfg)
    cfg, _ = load_recipe("rlvr-math", ["algorithm.kl_coef=0", "devices.reference.tp=2"])
    with pytest.raises(ConfigError, match="roles: actor_train, actor_infer, reward"):
        plan_recipe(cfg)
    cfg, _ = load_recipe("distill", ["devices.teacher.device_mapping=cpu"])
    assert plan_recipe(cfg).placements["teacher"] == "cpu"
    cfg, _ = load_recipe("agentic-frozenlake", ["devices.env.device_mapping=cpu"])
    assert plan_recipe(cfg).placements["env_val"] == "cpu"  # validation envs: devices.env


def test_doctests_of_the_table_and_the_fault_map() -> None:
    import doctest

    import rollcli.planning.role_table
    import rollcli.runs.faults

    for module in (rollcli.planning.role_table, rollcli.runs.faults):
        assert doctest.testmod(module).failed == 0

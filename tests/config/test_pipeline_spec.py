"""The pipeline spec is the one place that names a pipeline's properties: a row per recipe
type, runners and trainers that import, and no branch on a pipeline's name elsewhere."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

import rollcli
import rollcli.config.pipeline_spec
from rollcli.config.loader import load_recipe
from rollcli.config.pipeline_spec import PIPELINES, SPECS
from rollcli.config.recipe import RECIPE_TYPES
from rollcli.planning.role_table import roles_for

PACKAGE = Path(rollcli.__file__).parent
# `pipeline ==`, `!=`, `in`, `not in` on a recipe's pipeline name
BRANCH = re.compile(r"\.pipeline\s*(==|!=|in\b|not in\b)|\bpipeline\s*(==|!=)\s*[\"']")


def test_a_row_per_recipe_type_in_the_same_order() -> None:
    assert tuple(RECIPE_TYPES) == PIPELINES
    assert doctest.testmod(rollcli.config.pipeline_spec).failed == 0


@pytest.mark.parametrize("name", PIPELINES)
def test_runner_classes_exist(name: str) -> None:
    module, cls = SPECS[name].runner.split(":")
    assert isinstance(getattr(importlib.import_module(module), cls), type)


def test_no_module_branches_on_a_pipeline_name() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{i}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "pipeline_spec.py"
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if BRANCH.search(line) and not line.lstrip().startswith("#")
    ]
    assert not found, "branch on the spec's fields instead:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("recipe", "roles"),
    [
        ("rlvr-math", ["actor_train", "actor_infer", "reference", "reward"]),
        ("agentic-frozenlake", ["actor_train", "actor_infer", "env", "env_val"]),
        ("dpo", ["actor_train", "reference"]),
        ("sft", ["actor_train"]),
        ("distill", ["actor_train", "teacher"]),
    ],
)
def test_the_roles_follow_the_row(recipe: str, roles: list[str]) -> None:
    cfg, _ = load_recipe(recipe, [])
    assert [r.name for r in roles_for(cfg)] == roles


def test_the_role_table_places_each_role_by_its_devices_key() -> None:
    from rollcli.config.pipeline_spec import devices_key
    from rollcli.planning.role_table import TABLE

    assert {r.name: r.devices for r in TABLE} == {r.name: devices_key(r.name) for r in TABLE}

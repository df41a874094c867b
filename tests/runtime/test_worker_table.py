"""The worker table (runtime/worker_table.py) is whole and typed: it has a row for every role
of the planner's table, a worker class for every pipeline, and every worker class takes one
frozen args object (no keyword bag, no untyped dict from the plan)."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

from rollcli.config.loader import load_recipe
from rollcli.config.pipeline_spec import PIPELINES, roles_run
from rollcli.planning.role_table import TABLE
from rollcli.runtime.worker_table import TRAINERS, WORKERS, worker_class
from rollcli.workers.trained_model import TrainedModelWorker

CLASSES = sorted({cls for row in WORKERS.values() for cls in row.classes.values()}, key=str)


def test_a_row_for_every_role_of_the_planners_table() -> None:
    assert set(WORKERS) == {role.name for role in TABLE}


def test_every_role_has_a_worker_class_in_every_pipeline() -> None:
    for name, row in WORKERS.items():
        assert set(row.classes) == set(PIPELINES), name
    assert set(TRAINERS) == set(PIPELINES)
    assert all(issubclass(cls, TrainedModelWorker) for cls in TRAINERS.values())


@pytest.mark.parametrize("recipe", ["rlvr-math", "agentic-frozenlake", "dpo", "sft", "distill"])
def test_each_recipes_roles_find_their_class(recipe: str) -> None:
    cfg, _ = load_recipe(recipe, [])
    for role in roles_run(cfg):
        assert isinstance(worker_class(role, cfg), type)
    assert worker_class("actor_train", cfg) is TRAINERS[cfg.pipeline]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_each_worker_takes_one_frozen_args_object(cls: type) -> None:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]  # after self
    # `ray.remote(cls)` (any earlier test that made an actor of it) adds Ray's tracing hook
    # to the class's own methods: not an argument the plan gives
    params = [p for p in params if p.name != "_ray_trace_ctx"]
    assert len(params) == 1, f"{cls.__name__}.__init__ takes {[p.name for p in params]}"
    (param,) = params
    assert param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    hints = typing.get_type_hints(cls.__init__)
    args_type = hints[param.name]
    assert dataclasses.is_dataclass(args_type), f"{cls.__name__}: {args_type}"
    assert args_type.__dataclass_params__.frozen, f"{args_type.__name__} is not frozen"


def test_the_build_functions_are_the_rows_only_dispatch() -> None:
    """runtime/ picks a role's worker and arguments through the table, never by its name."""
    from pathlib import Path

    import rollcli.runtime

    folder = Path(rollcli.runtime.__file__).parent
    found = [
        f"{path.name}:{i}"
        for path in sorted(folder.glob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if "role.name ==" in line or "role.name in (" in line
    ]
    assert not found, found

"""The modules the driver imports in the background while Ray starts (launch._drive)."""

from __future__ import annotations

import importlib
import sys

import pytest

from rollcli.config.loader import load_recipe
from rollcli.launch.launch import _driver_modules, _import_in_background
from rollcli.launch.registry import pipeline_class


@pytest.mark.parametrize(
    ("recipe", "generator"),
    [("rlvr-math", True), ("sft", True), ("agentic-frozenlake", False), ("webshop", False)],
)
def test_each_recipe_preloads_its_pipeline_and_only_the_data_it_draws(recipe, generator):
    cfg, _ = load_recipe(recipe, [], {"model": "tiny-random"})
    modules = _driver_modules(cfg)
    # the module that holds the class the launch then builds
    assert pipeline_class(cfg.pipeline).__module__ == modules[0]
    assert ("reasoning_gym" in modules) == generator
    for name in modules:
        assert importlib.util.find_spec(name) is not None, name


def test_a_module_that_fails_to_import_fails_where_it_is_needed():
    sys.modules.pop("tabnanny", None)  # a module nothing else here imports
    thread = _import_in_background("rollcli.no_such_module", "tabnanny")
    thread.join(timeout=30)
    # the failure did not stop the thread: the next module was imported
    assert not thread.is_alive() and "tabnanny" in sys.modules
    with pytest.raises(ModuleNotFoundError, match="rollcli.no_such_module"):
        importlib.import_module("rollcli.no_such_module")

"""Run the doctest examples of the environment modules, imported under their package names."""

import doctest
import importlib

import pytest

MODULES = [
    "rollcli.envs.action_parsing",
    "rollcli.envs.frozenlake",
    "rollcli.envs.layout_split",
    "rollcli.envs.sokoban.env",
    "rollcli.envs.sokoban.generator",
    "rollcli.envs.sokoban.level",
    "rollcli.envs.sokoban.solver",
    "rollcli.envs.tools.calculator",
    "rollcli.envs.tools.call_format",
    "rollcli.envs.tools.catalog",
    "rollcli.envs.tools.env",
    "rollcli.envs.tools.tasks",
    "rollcli.envs.tools.tool",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0

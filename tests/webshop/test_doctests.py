"""Run the doctest examples of every WebShop module."""

import doctest
import importlib

import pytest

MODULES = ["actions", "catalog", "env", "generator", "goals", "oracle", "pages", "reward", "search"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(f"rollcli.envs.webshop.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

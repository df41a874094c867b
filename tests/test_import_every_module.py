"""Every module of the installed package imports (optional backends excepted)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import rollcli

SKIP = {"rollcli.__main__", "rollcli.rewards.sandbox.launcher", "rollcli.rewards.sandbox.runner"}


def _modules() -> list[str]:
    """Every module under rollcli/ (envs, rewards and recipes are packages of it)."""
    names = sorted(
        info.name
        for info in pkgutil.walk_packages(rollcli.__path__, "rollcli.")
        if info.name not in SKIP
    )
    assert {"rollcli.envs.registry", "rollcli.rewards.registry", "rollcli.recipes"} <= set(names)
    return names


@pytest.mark.parametrize("name", _modules())
def test_module_imports(name: str) -> None:
    importlib.import_module(name)

"""Every module of the installed package imports (optional backends excepted)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import rollcli

SKIP = {"rollcli.__main__", "rollcli.rewards.sandbox.launcher", "rollcli.rewards.sandbox.runner"}


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(rollcli.__path__, "rollcli."):
        if info.name not in SKIP:
            names.append(info.name)
    for sub in ("rollcli.envs", "rollcli.rewards", "rollcli.recipes"):
        pkg = importlib.import_module(sub)
        names += [
            i.name for i in pkgutil.walk_packages(pkg.__path__, f"{sub}.") if i.name not in SKIP
        ]
    return sorted(set(names))


@pytest.mark.parametrize("name", _modules())
def test_module_imports(name: str) -> None:
    importlib.import_module(name)

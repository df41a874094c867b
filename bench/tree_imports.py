"""Import roll from this checkout without installing it (the GPU machine of docs/gpu.md).

setup.py ships `envs/`, `rewards/` and `recipes/` as `rollcli.envs`, `rollcli.rewards` and
`rollcli.recipes`; `use_tree()` puts the checkout on `sys.path` and maps those three names
to their folders, unless roll is installed (then nothing changes).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAPPED = {"rollcli.envs": "envs", "rollcli.rewards": "rewards", "rollcli.recipes": "recipes"}


class _TreeFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name not in MAPPED:
            return None
        folder = REPO / MAPPED[name]
        return importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


def use_tree() -> None:
    if importlib.util.find_spec("rollcli") is not None:
        return  # installed (an editable install maps the three names itself)
    sys.path.insert(0, str(REPO))
    sys.meta_path.insert(0, _TreeFinder())

"""Import roll from this checkout without installing it (the GPU machine of docs/gpu.md).

Every package of roll lives under `rollcli/` (envs, rewards and the recipe catalogue
included), so `use_tree()` only puts the checkout on `sys.path`, unless roll is installed
(then nothing changes).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def use_tree() -> None:
    if importlib.util.find_spec("rollcli") is not None:
        return  # installed
    sys.path.insert(0, str(REPO))

"""Shared fixtures: the tiny-random model folder (built once per session, in a temp cache).

This folder goes on sys.path so test modules can import shared helpers
(`from roll_subprocess import roll`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from rollcli.models.loading import resolve_model

    return resolve_model("tiny-random")

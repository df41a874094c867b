"""Shared fixtures: the tiny-random model folder (built once per session, in a temp cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    from rollcli.models.loading import resolve_model

    return resolve_model("tiny-random")

"""The examples in the reward modules' docstrings run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rollcli.rewards.code",
    "rollcli.rewards.mix",
    "rollcli.rewards.ifeval.constraints",
    "rollcli.rewards.ifeval.reward",
    "rollcli.rewards.ifeval.prompts",
    "rollcli.rewards.judge.rubric",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0

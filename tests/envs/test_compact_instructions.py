"""`compact_instructions=True`: FrozenLake's and Sokoban's rules in about half the tokens,
still naming every symbol, every move, the answer format and the move limit; the default
system prompt is unchanged."""

from __future__ import annotations

import pytest

from rollcli.envs.frozenlake import ACTION_NAMES, FrozenLakeEnv
from rollcli.envs.sokoban.env import SokobanEnv


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [(FrozenLakeEnv, {"size": 3, "is_slippery": True}), (SokobanEnv, {"step_penalty": -0.2})],
)
def test_compact_instructions_keep_the_rules_in_fewer_words(cls, kwargs) -> None:
    full = cls(max_steps=7, **kwargs)
    compact = cls(max_steps=7, compact_instructions=True, **kwargs)
    assert cls(max_steps=7, compact_instructions=False, **kwargs).instructions == full.instructions
    text = compact.instructions
    assert len(text.split()) < 0.6 * len(full.instructions.split())
    for line in full.symbols.legend().splitlines():  # "_ frozen ice (safe)", "# wall", ...
        assert line in text
    for move in full.action_names:
        assert move in text
    assert "At most 7 moves" in text and "<answer>" in text
    if cls is FrozenLakeEnv:
        assert "Slippery" in text and set(full.action_names) == set(ACTION_NAMES)
    else:
        assert "-0.2 per move" in text and "+10 solved" in text

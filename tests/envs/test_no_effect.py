"""Moves without effect: the next observation says so (and why), optionally with a penalty."""

from __future__ import annotations

import pytest

from rollcli.envs.frozenlake import EDGE_NOTE, FrozenLakeEnv
from rollcli.envs.sokoban import SokobanEnv

ROOM = """
#####
#PX_#
#___#
#_O_#
#####
"""


def test_frozenlake_move_off_the_edge_is_reported_with_its_penalty() -> None:
    env = FrozenLakeEnv(desc=["SF", "HG"], no_effect_feedback=True, no_effect_penalty=-0.05)
    obs, _ = env.reset(seed=0)
    after, reward, _, _, info = env.step("<answer>Up</answer>")
    assert after == f"{EDGE_NOTE}\n{obs}"
    assert env.render_text() == obs and env.get_state_key() == obs  # the state is unchanged
    assert info["action_is_effective"] is False
    assert reward == -0.05 and info["no_effect_penalty"] == -0.05
    after, reward, _, _, info = env.step("<answer>Right</answer>")  # a real move: no note
    assert after == env.render_text() and "Nothing happened" not in after
    assert reward == 0.0 and info["no_effect_penalty"] == 0.0


def test_sokoban_says_whether_a_wall_or_a_stuck_box_stopped_the_move() -> None:
    env = SokobanEnv(layout=ROOM, no_effect_feedback=True, no_effect_penalty=-0.2)
    env.reset(seed=0)
    obs, reward, *_ = env.step("<answer>Up</answer>")
    assert obs.splitlines()[0] == "Nothing happened: there is a wall above you."
    assert reward == pytest.approx(-0.1 - 0.2)  # step penalty + no-effect penalty
    obs, reward, *_ = env.step("<answer>Right</answer>")  # pushes the box to (1, 3)
    assert not obs.startswith("Nothing") and reward == pytest.approx(-0.1)
    obs, reward, *_ = env.step("<answer>Right</answer>")  # the box is against the wall
    assert obs.splitlines()[0] == (
        "Nothing happened: the box to your right cannot move, a wall or a box is behind it."
    )
    assert obs.split("\n", 1)[1] == env.render_text()


def test_off_by_default_and_never_for_an_invalid_reply() -> None:
    env = FrozenLakeEnv(desc=["SF", "HG"])
    obs, _ = env.reset(seed=0)
    after, reward, *_, info = env.step("<answer>Up</answer>")
    assert after == obs and reward == 0.0 and info["no_effect_penalty"] == 0.0
    env = FrozenLakeEnv(desc=["SF", "HG"], no_effect_feedback=True, no_effect_penalty=-0.05)
    obs, _ = env.reset(seed=0)
    after, reward, *_, info = env.step("<answer>jump</answer>")  # the format penalty only
    assert after == obs and reward == -0.1 and info["no_effect_penalty"] == 0.0


def test_a_positive_penalty_is_refused() -> None:
    with pytest.raises(ValueError, match="no_effect_penalty must be 0 or negative"):
        SokobanEnv(no_effect_penalty=0.1)

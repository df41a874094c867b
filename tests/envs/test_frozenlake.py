"""FrozenLake: random solvable maps, our text rendering, action mapping, goal by BFS."""

from __future__ import annotations

from collections import deque

import pytest

from rollcli.envs import make
from rollcli.envs.frozenlake import ACTION_NAMES, FrozenLakeEnv

STEPS = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}


def answer(move: str) -> str:
    return f"<answer>{move}</answer>"


def bfs_path(desc: list[str]) -> list[str]:
    """Shortest list of moves from S to G over non-hole tiles."""
    rows, cols = len(desc), len(desc[0])
    start = next((r, c) for r in range(rows) for c in range(cols) if desc[r][c] == "S")
    previous: dict[tuple[int, int], tuple[tuple[int, int], str] | None] = {start: None}
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        if desc[cell[0]][cell[1]] == "G":
            path = []
            while previous[cell] is not None:
                cell, move = previous[cell]  # type: ignore[misc]
                path.append(move)
            return path[::-1]
        for move, (dr, dc) in STEPS.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            inside = 0 <= nxt[0] < rows and 0 <= nxt[1] < cols
            if inside and nxt not in previous and desc[nxt[0]][nxt[1]] != "H":
                previous[nxt] = (cell, move)
                queue.append(nxt)
    raise AssertionError(f"no path in {desc}")


@pytest.mark.parametrize("size", [4, 6, 8])
def test_the_goal_is_reached_along_a_bfs_path(size: int) -> None:
    env = make("frozenlake", size=size)
    for seed in range(15):
        obs, _ = env.reset(seed=seed)
        assert env.desc is not None and len(env.desc) == size
        path = bfs_path(env.desc)
        for i, move in enumerate(path):
            obs, reward, terminated, truncated, info = env.step(answer(move))
            assert info["action_is_effective"]
            assert terminated == (i == len(path) - 1)
        assert reward == 1.0 and info["success"] and not truncated
        assert "√" in obs and "P" not in obs


def test_rendering_matches_the_map_without_ansi() -> None:
    env = FrozenLakeEnv(size=8, p=0.7)
    obs, _ = env.reset(seed=5)
    assert env.desc is not None
    expected = "\n".join(env.desc).replace("S", "P").replace("F", "_").replace("H", "O")
    assert obs == expected and "\x1b" not in obs


def test_actions_follow_gymnasium_indices_and_holes_end_the_episode() -> None:
    assert ACTION_NAMES == ["Left", "Down", "Right", "Up"]  # gymnasium's 0, 1, 2, 3
    env = FrozenLakeEnv(desc=["SFF", "FHF", "FFG"])
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(answer("up"))
    assert env.position == (0, 0) and not info["action_is_effective"] and reward == 0.0
    env.step(answer("Right"))
    assert env.position == (0, 1)
    obs, reward, terminated, truncated, info = env.step(answer("DOWN"))
    assert env.position == (1, 1) and terminated and not truncated
    assert reward == 0.0 and info["success"] is False
    assert obs == "___\n_X_\n__G"


def test_maps_depend_on_the_reset_seed_only() -> None:
    def map_for(seed: int) -> tuple[str, ...]:
        env = make("frozenlake", size=5)
        env.reset(seed=seed)
        return tuple(env.desc or ())

    maps = [map_for(s) for s in range(8)]
    assert maps == [map_for(s) for s in range(8)]
    assert len(set(maps)) > 4


def test_slippery_ice_is_reproducible_under_a_seed() -> None:
    def trace(seed: int) -> list[tuple[int, int]]:
        env = FrozenLakeEnv(size=8, p=1.0, is_slippery=True, max_steps=30)
        env.reset(seed=seed)
        positions = []
        for _ in range(30):
            *_, terminated, truncated, _ = env.step(answer("Right"))
            positions.append(env.position)
            if terminated or truncated:
                break
        return positions

    assert trace(1) == trace(1)
    assert any(r > 0 for r, _ in trace(1)), "slippery ice should sometimes slide sideways"
    assert "slippery" in FrozenLakeEnv(is_slippery=True).instructions


def test_invalid_reply_costs_only_the_format_penalty() -> None:
    env = FrozenLakeEnv(desc=["SF", "FG"])
    obs, _ = env.reset(seed=0)
    new_obs, reward, terminated, truncated, info = env.step("I go right")
    assert (new_obs, reward, terminated, truncated) == (obs, -0.1, False, False)
    assert info["action_is_valid"] is False and info["format_penalty"] == -0.1


@pytest.mark.parametrize("kwargs", [{"p": 0.0}, {"p": 1.5}, {"size": 1}, {"max_steps": 0}])
def test_bad_arguments_are_rejected(kwargs) -> None:
    with pytest.raises(ValueError):
        FrozenLakeEnv(**kwargs)

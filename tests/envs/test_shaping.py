"""Progress shaping is potential-based: its discounted sum telescopes, and it leaves the
optimal policy unchanged (value iteration on small maps, shaped and unshaped)."""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable

import pytest

from rollcli.envs.frozenlake import FrozenLakeEnv, goal_distances
from rollcli.envs.sokoban import SokobanEnv
from rollcli.envs.text_env import TextEnv

GAMMA = 0.9
SOKOBAN_ROOM = """
#####
#P__#
#_X_#
#__O#
#####
"""


def _make(name: str, **kwargs) -> TextEnv:
    if name == "frozenlake":
        return FrozenLakeEnv(size=4, max_steps=12, **kwargs)
    return SokobanEnv(dim_room=(6, 6), num_boxes=1, max_steps=12, **kwargs)


@pytest.mark.parametrize("name", ["frozenlake", "sokoban"])
@pytest.mark.parametrize("gamma", [1.0, GAMMA])
def test_discounted_shaping_telescopes_over_random_episodes(name: str, gamma: float) -> None:
    rng = random.Random(0)
    for seed in range(40):
        env = _make(name, shaping="progress", shaping_gamma=gamma)
        plain = _make(name)
        env.reset(seed=seed)
        plain.reset(seed=seed)
        start = env.potential()
        total, t, done, terminated = 0.0, 0, False, False
        while not done:
            move = rng.choice([*env.action_names, "jump"])  # some replies are invalid
            _, reward, terminated, truncated, info = env.step(f"<answer>{move}</answer>")
            _, plain_reward, *_ = plain.step(f"<answer>{move}</answer>")
            assert reward == pytest.approx(plain_reward + info["shaping"])  # only adds F
            total += gamma**t * info["shaping"]
            t += 1
            done = terminated or truncated
        end = 0.0 if terminated else env.potential()  # terminal states have potential 0
        assert total == pytest.approx(gamma**t * end - start, abs=1e-9)


def test_frozenlake_potential_is_minus_the_safe_walk_to_the_goal() -> None:
    # a row of holes between start and goal: the walk is 8 moves, not 2 (Manhattan)
    desc = ["SFFF", "HHHF", "GFFF"]
    assert goal_distances(desc)[(0, 0)] == 8
    assert (1, 0) not in goal_distances(desc)  # a hole
    env = FrozenLakeEnv(desc=desc, shaping="progress")
    env.reset(seed=0)
    assert env.potential() == -8.0
    env.step("<answer>Right</answer>")
    assert env.potential() == -7.0


def test_sokoban_potential_is_minus_box_distance_to_the_nearest_target() -> None:
    env = SokobanEnv(layout=SOKOBAN_ROOM, shaping="progress")
    env.reset(seed=0)
    assert env.potential() == -2.0  # box (2, 2), target (3, 3): 1 + 1


def test_shaping_is_off_by_default_and_refused_where_there_is_no_potential() -> None:
    env = FrozenLakeEnv(desc=["SF", "HG"])
    env.reset(seed=0)
    _, reward, *_, info = env.step("<answer>Right</answer>")
    assert reward == 0.0 and info["shaping"] == 0.0

    class NoPotential(FrozenLakeEnv):
        potential = TextEnv.potential

    with pytest.raises(ValueError, match="defines no potential"):
        NoPotential(shaping="progress")
    with pytest.raises(ValueError, match="shaping must be one of none, progress"):
        FrozenLakeEnv(shaping="distance")


# ---- the optimal policy is unchanged ------------------------------------------------------
Model = dict[str, dict[str, tuple[float, str, bool]]]


def _explore(make: Callable[[], TextEnv]) -> tuple[Model, dict[str, float]]:
    """Every state reachable from the start, each action's (reward, next state, terminal),
    and each state's potential, by replaying move sequences in fresh envs."""

    def play(moves: tuple[str, ...]) -> tuple[TextEnv, float, bool]:
        env = make()
        env.reset(seed=0)
        reward, terminated = 0.0, False
        for move in moves:
            _, reward, terminated, _, _ = env.step(f"<answer>{move}</answer>")
        return env, reward, terminated

    model: Model = {}
    potentials: dict[str, float] = {}
    queue: deque[tuple[str, ...]] = deque([()])
    seen: set[str] = set()
    while queue:
        path = queue.popleft()
        env, _, _ = play(path)
        key = env.get_state_key()
        if key in seen:
            continue
        seen.add(key)
        potentials[key] = env.potential()
        model[key] = {}
        for move in env.action_names:
            after, reward, terminated = play((*path, move))
            model[key][move] = (reward, after.get_state_key(), terminated)
            if not terminated:
                queue.append((*path, move))
    return model, potentials


def _q_values(model: Model, gamma: float) -> dict[str, dict[str, float]]:
    values = dict.fromkeys(model, 0.0)
    for _ in range(300):
        q = {
            s: {a: r + (0.0 if done else gamma * values[s2]) for a, (r, s2, done) in acts.items()}
            for s, acts in model.items()
        }
        values = {s: max(q[s].values()) for s in model}
    return q


def _best(q: dict[str, float]) -> set[str]:
    top = max(q.values())
    return {a for a, v in q.items() if v > top - 1e-6}


CASES = {
    "frozenlake-3x3": lambda **kw: FrozenLakeEnv(desc=["SFF", "FHF", "FFG"], max_steps=99, **kw),
    "frozenlake-4x4": lambda **kw: FrozenLakeEnv(
        desc=["SFFF", "FHFH", "FFFH", "HFFG"], max_steps=99, **kw
    ),
    "sokoban-room": lambda **kw: SokobanEnv(layout=SOKOBAN_ROOM, max_steps=99, **kw),
}


@pytest.mark.parametrize("case", list(CASES))
def test_shaped_optimal_policy_equals_the_unshaped_one(case: str) -> None:
    build = CASES[case]
    plain, potentials = _explore(build)
    shaped, _ = _explore(lambda: build(shaping="progress", shaping_gamma=GAMMA))
    assert shaped.keys() == plain.keys() and len(plain) > 5
    q_plain, q_shaped = _q_values(plain, GAMMA), _q_values(shaped, GAMMA)
    changed = 0
    for state in plain:
        assert _best(q_shaped[state]) == _best(q_plain[state]), state
        for action, value in q_plain[state].items():
            # Ng et al. 1999: Q_shaped(s, a) = Q(s, a) - phi(s)
            assert q_shaped[state][action] == pytest.approx(value - potentials[state], abs=1e-6)
            changed += shaped[state][action][0] != plain[state][action][0]
    assert changed > 0  # the shaping did change the rewards

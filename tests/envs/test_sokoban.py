"""Sokoban: reverse-play generator, per-transition rewards, symbols and thread safety."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from rollcli.envs import make
from rollcli.envs.sokoban import SokobanEnv, SokobanState, SokobanSymbols, generate_level


def answer(move: str) -> str:
    return f"<answer>{move}</answer>"


# ----- generator -------------------------------------------------------------------------
@pytest.mark.parametrize(("dim_room", "num_boxes"), [((5, 5), 1), ((6, 6), 1), ((7, 8), 2)])
def test_recorded_reverse_play_solves_every_level(dim_room, num_boxes) -> None:
    rows, cols = dim_room
    for seed in range(100):
        level = generate_level(dim_room, num_boxes, seed=seed)
        state = level.state
        assert state.shape == dim_room
        assert len(state.boxes) == len(state.targets) == num_boxes
        assert not state.solved
        border = {(r, c) for r in range(rows) for c in range(cols)} - {
            (r, c) for r in range(1, rows - 1) for c in range(1, cols - 1)
        }
        assert border <= state.walls
        assert state.player not in state.walls | state.boxes
        for move in level.solution:
            state, _ = state.move(move)
        assert state.solved, f"seed {seed}: the recorded solution does not solve the level"


def test_the_env_follows_its_solution_to_success() -> None:
    env = make("sokoban", dim_room=(7, 7), num_boxes=2, max_steps=500)
    for seed in range(10):
        env.reset(seed=seed)
        assert env.solution
        for move in env.solution:
            _, reward, terminated, truncated, info = env.step(answer(move))
            if terminated:
                break
        assert info["success"] and not truncated
        # The solving move pushes the last box onto its target.
        assert reward == pytest.approx(-0.1 + 1 + 10)


def test_same_seed_same_level_different_seeds_vary() -> None:
    env = make("sokoban")
    first = [env.reset(seed=s)[0] for s in range(10)]
    again = [env.reset(seed=s)[0] for s in range(10)]
    assert first == again
    assert len(set(first)) >= 8


def test_impossible_rooms_are_rejected_clearly() -> None:
    with pytest.raises(ValueError, match="too few"):
        generate_level((4, 4), num_boxes=3)
    with pytest.raises(ValueError, match="at least"):
        generate_level((2, 5))


def test_generation_is_thread_safe() -> None:
    seeds = list(range(40)) * 2
    expected = [generate_level((7, 7), 2, seed=s) for s in seeds]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda s: generate_level((7, 7), 2, seed=s), seeds))
    assert got == expected

    def first_observation(seed: int) -> str:
        return SokobanEnv(dim_room=(7, 7), num_boxes=2).reset(seed=seed)[0]

    with ThreadPoolExecutor(max_workers=4) as pool:
        observations = list(pool.map(first_observation, seeds))
    assert observations == [first_observation(s) for s in seeds]


# ----- rewards on hand-written levels ----------------------------------------------------
WALK = """
######
#P__O#
#__X_#
######
"""
PUSHES = """
########
#PX_OO_#
#__X___#
########
"""
BOX_BLOCKS_BOX = """
#######
#PXX_O#
#____O#
#######
"""
TWO_BOXES = """
######
#PXO_#
#_XO_#
######
"""


@pytest.mark.parametrize(
    ("layout", "moves", "rewards", "effective"),
    [
        # Walls stop the player; a plain walk costs the step penalty.
        (WALK, ["Left", "Up", "Right", "Down"], [-0.1, -0.1, -0.1, -0.1], [0, 0, 1, 1]),
        # floor -> floor, floor -> target (+1), target -> target (0), target -> floor (-1),
        # then the box is against the wall.
        (PUSHES, ["Right"] * 5, [-0.1, 0.9, -0.1, -1.1, -0.1], [1, 1, 1, 1, 0]),
        # A box cannot push another box.
        (BOX_BLOCKS_BOX, ["Right"], [-0.1], [0]),
    ],
)
def test_rewards_per_transition(layout, moves, rewards, effective) -> None:
    env = SokobanEnv(layout=layout)
    env.reset(seed=0)
    for move, expected_reward, expected_effective in zip(moves, rewards, effective, strict=True):
        _, reward, terminated, truncated, info = env.step(answer(move))
        assert reward == pytest.approx(expected_reward), move
        assert info["action_is_effective"] is bool(expected_effective), move
        assert info["action_is_valid"] is True
        assert info["format_penalty"] == 0.0
        assert not terminated and not truncated and not info["success"]


def test_solving_the_last_box_pays_the_success_reward_and_ends() -> None:
    env = SokobanEnv(layout=TWO_BOXES)
    obs, info = env.reset(seed=0)
    assert info["boxes_on_target"] == 0 and info["num_boxes"] == 2
    outcomes = [env.step(answer(m)) for m in ["Right", "Left", "Down", "Right"]]
    assert [round(o[1], 6) for o in outcomes] == [0.9, -0.1, -0.1, 10.9]
    assert [o[2] for o in outcomes] == [False, False, False, True]
    assert outcomes[-1][4]["success"] and outcomes[-1][4]["boxes_on_target"] == 2
    assert outcomes[-1][0] == "######\n#__√_#\n#_P√_#\n######"


def test_rendering_shows_the_player_on_a_target() -> None:
    env = SokobanEnv(layout=PUSHES)
    env.reset()
    for _ in range(3):
        obs = env.step(answer("Right"))[0]
    assert obs.splitlines()[1] == "#___S√_#"


def test_invalid_reply_costs_step_and_format_penalty() -> None:
    env = SokobanEnv(layout=WALK, format_penalty=-1.0)
    obs, _ = env.reset()
    new_obs, reward, *_, info = env.step("<answer>north</answer>")
    assert new_obs == obs and reward == pytest.approx(-1.1)
    assert info["parse_reason"].startswith("unknown action") and info["steps"] == 1


def test_stepping_after_the_end_requires_a_reset() -> None:
    env = SokobanEnv(layout=WALK, max_steps=1)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(answer("Up"))
    env.reset()
    env.step(answer("Up"))
    with pytest.raises(RuntimeError, match="reset"):
        env.step(answer("Up"))


# ----- symbols and layouts ---------------------------------------------------------------
def test_custom_symbols_round_trip_and_reach_the_instructions() -> None:
    symbols = {"floor": ".", "box_on_target": "*", "player_on_target": "+"}
    env = SokobanEnv(layout=WALK.replace("_", "."), symbols=symbols)
    obs, _ = env.reset()
    assert obs == WALK.strip().replace("_", ".")
    assert ". floor" in env.instructions and "* box on a target" in env.instructions
    assert SokobanState.from_layout(obs, SokobanSymbols(**symbols)) == env.state


@pytest.mark.parametrize(
    ("symbols", "message"),
    [({"wall": "X"}, "differ"), ({"floor": "ab"}, "single"), ({"flor": "."}, "unknown")],
)
def test_bad_symbols_are_rejected(symbols, message) -> None:
    with pytest.raises(ValueError, match=message):
        SokobanEnv(symbols=symbols)


@pytest.mark.parametrize(
    ("layout", "message"),
    [("#P#\n#X#", "as many boxes"), ("#_O#\n#X_#", "one player"), ("#P?#", "unknown symbol")],
)
def test_bad_layouts_are_rejected(layout, message) -> None:
    with pytest.raises(ValueError, match=message):
        SokobanState.from_layout(layout)

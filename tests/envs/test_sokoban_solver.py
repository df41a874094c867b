"""The BFS Sokoban solver: its solutions solve, are never longer than the generator's, and
a level with a box stuck in a corner has none."""

from __future__ import annotations

import pytest

from rollcli.envs.sokoban import SokobanState, generate_level
from rollcli.envs.sokoban.solver import solve


@pytest.mark.parametrize(("dim_room", "num_boxes"), [((6, 6), 1), ((7, 7), 2)])
def test_solutions_solve_and_are_at_most_the_generators_length(dim_room, num_boxes) -> None:
    for seed in range(15):
        level = generate_level(dim_room, num_boxes, seed=seed)
        moves = solve(level.state)
        assert moves is not None and len(moves) <= len(level.solution)
        state = level.state
        for move in moves:
            state, _ = state.move(move)
        assert state.solved


def test_a_stuck_box_has_no_solution_and_a_solved_level_needs_no_move() -> None:
    stuck = SokobanState.from_layout(
        """
        #####
        #X__#
        #_P_#
        #__O#
        #####
        """
    )
    assert solve(stuck) is None
    done = SokobanState.from_layout("####\n#P√#\n####")
    assert solve(done) == ()


def test_the_search_is_bounded() -> None:
    far = SokobanState.from_layout(
        """
        #######
        #P____#
        #__X__#
        #____O#
        #######
        """
    )
    assert len(solve(far)) == 7  # 2 to the box, 2 pushes right, around it, 1 push down
    with pytest.raises(ValueError, match="no solution within 3 states"):
        solve(far, max_states=3)

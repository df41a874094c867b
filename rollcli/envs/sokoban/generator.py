"""Random Sokoban levels by reverse play, so every level is solvable.

1. Carve a room: walls all around, the inside opened by a random walk (so the floor is
   connected) until a random 60-90 % of the inner cells are floor.
2. Put every box on a target and the player on another floor cell: a solved position.
3. Play backwards: the player walks in random directions and, when a box is right behind
   it, usually *pulls* the box along. Every reverse move undoes a legal forward move, so
   the reversed sequence of opposite moves solves the level.
4. Of all positions visited, keep the one with the most boxes off target (then the largest
   total distance of boxes from targets), and the moves that led to it.

`generate_level` draws all its randomness from its own `numpy.random.Generator`, so it is
thread-safe and the same seed gives the same level on any thread.

Example:
    >>> level = generate_level((6, 6), num_boxes=1, seed=3)
    >>> state = level.state
    >>> for move in level.solution:
    ...     state, _ = state.move(move)
    >>> state.solved, level.state.solved
    (True, False)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rollcli.envs.sokoban.level import DIRECTIONS, OPPOSITE, Pos, SokobanState

_MOVE_NAMES = list(DIRECTIONS)
_PULL_PROBABILITY = 0.8  # below 1 so that the player sometimes walks away from a box
_FLOOR_FRACTION = (0.6, 0.9)


@dataclass(frozen=True)
class GeneratedLevel:
    """A generated start position and a sequence of moves that solves it."""

    state: SokobanState
    solution: tuple[str, ...]


def generate_level(
    dim_room: tuple[int, int] = (6, 6),
    num_boxes: int = 1,
    *,
    seed: int | np.random.Generator | None = None,
    reverse_steps: int = 100,
    max_tries: int = 100,
) -> GeneratedLevel:
    """Generate a solvable level of `dim_room` = (rows, columns) cells, outer walls included.

    Args:
        dim_room: room size including the surrounding walls; at least 3 x 3.
        num_boxes: boxes (and targets) in the room.
        seed: an int, a `numpy.random.Generator` (consumed), or None for fresh entropy.
        reverse_steps: random reverse moves tried per attempt.
        max_tries: attempts (each with a new room) before giving up.

    Raises:
        ValueError: the room cannot hold the boxes, or no attempt moved a box off target.
    """
    rows, cols = (int(n) for n in dim_room)
    inner = (rows - 2) * (cols - 2)
    if rows < 3 or cols < 3:
        raise ValueError(f"dim_room must be at least (3, 3) with its walls, got {dim_room}")
    if num_boxes < 1:
        raise ValueError(f"num_boxes must be at least 1, got {num_boxes}")
    if inner < num_boxes + 2:
        raise ValueError(
            f"a {rows}x{cols} room has {inner} inner cells, too few for {num_boxes} box(es); "
            f"use a larger dim_room or fewer boxes"
        )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    for _ in range(max_tries):
        walls = _carve_room(rows, cols, num_boxes, rng)
        floor = [(r, c) for r in range(rows) for c in range(cols) if (r, c) not in walls]
        picks = rng.choice(len(floor), size=num_boxes + 1, replace=False)
        targets = frozenset(floor[i] for i in picks[:num_boxes])
        solved = SokobanState(
            shape=(rows, cols),
            walls=walls,
            targets=targets,
            boxes=targets,
            player=floor[picks[-1]],
        )
        level = _reverse_play(solved, reverse_steps, rng)
        if level is not None:
            return level
    raise ValueError(
        f"could not generate a {rows}x{cols} level with {num_boxes} box(es) in {max_tries} "
        f"tries; use a larger dim_room or fewer boxes"
    )


def _carve_room(rows: int, cols: int, num_boxes: int, rng: np.random.Generator) -> frozenset[Pos]:
    """Walls of a room whose connected floor is opened by a random walk inside the border."""
    inner = (rows - 2) * (cols - 2)
    wanted = max(num_boxes + 2, round(rng.uniform(*_FLOOR_FRACTION) * inner))
    is_wall = np.ones((rows, cols), dtype=bool)
    row, col = int(rng.integers(1, rows - 1)), int(rng.integers(1, cols - 1))
    is_wall[row, col] = False
    opened = 1
    while opened < wanted:
        d_row, d_col = DIRECTIONS[_MOVE_NAMES[rng.integers(4)]]
        row = min(max(row + d_row, 1), rows - 2)
        col = min(max(col + d_col, 1), cols - 2)
        if is_wall[row, col]:
            is_wall[row, col] = False
            opened += 1
    return frozenset((int(r), int(c)) for r, c in zip(*np.nonzero(is_wall), strict=True))


def _reverse_play(
    solved: SokobanState, steps: int, rng: np.random.Generator
) -> GeneratedLevel | None:
    """Walk and pull boxes backwards from `solved`; None if no box ever left its target."""
    state, moves = solved, []
    best: tuple[tuple[int, int], SokobanState, int] | None = None
    for _ in range(steps):
        name = _MOVE_NAMES[rng.integers(4)]
        d_row, d_col = DIRECTIONS[name]
        row, col = state.player
        ahead = (row + d_row, col + d_col)
        if state.is_wall(ahead) or ahead in state.boxes:
            continue
        behind = (row - d_row, col - d_col)
        boxes = state.boxes
        if behind in boxes and rng.random() < _PULL_PROBABILITY:
            boxes = (boxes - {behind}) | {state.player}
        state = SokobanState(state.shape, state.walls, state.targets, boxes, ahead)
        moves.append(name)
        score = _score(state)
        if score[0] > 0 and (best is None or score > best[0]):
            best = (score, state, len(moves))
    if best is None:
        return None
    _, start, length = best
    solution = tuple(OPPOSITE[name] for name in reversed(moves[:length]))
    return GeneratedLevel(start, solution)


def _score(state: SokobanState) -> tuple[int, int]:
    """(boxes off target, sum of each box's distance to its nearest target)."""
    off = state.boxes - state.targets
    distance = sum(
        min(abs(r - tr) + abs(c - tc) for tr, tc in state.targets) for r, c in state.boxes
    )
    return len(off), distance

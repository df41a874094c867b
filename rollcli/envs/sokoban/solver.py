"""A shortest-solution Sokoban solver: breadth-first search over (player, boxes) states.

Every move (a walk or a push) costs one step, so the first solved state found is reached in
the fewest moves. The state space grows with the room and the boxes (a 6x6 room with one
box has a few hundred states); `max_states` bounds the search. Used as the expert policy
of `roll data episodes` and in tests.

Example:
    >>> from rollcli.envs.sokoban.level import SokobanState
    >>> state = SokobanState.from_layout('''
    ...     #####
    ...     #P__#
    ...     #_XO#
    ...     #####
    ... ''')
    >>> solve(state)
    ('Down', 'Right')
"""

from __future__ import annotations

from collections import deque

from rollcli.envs.sokoban.level import DIRECTIONS, SokobanState

MAX_STATES = 200_000


def solve(state: SokobanState, max_states: int = MAX_STATES) -> tuple[str, ...] | None:
    """The moves of a shortest solution from `state`; () if it is solved, None if it cannot
    be solved.

    Raises:
        ValueError: more than `max_states` states were visited without a solution.
    """
    if state.solved:
        return ()
    parents: dict[SokobanState, tuple[SokobanState, str] | None] = {state: None}
    queue = deque([state])
    while queue:
        current = queue.popleft()
        for name in DIRECTIONS:
            nxt, _ = current.move(name)
            if nxt in parents:
                continue
            parents[nxt] = (current, name)
            if nxt.solved:
                return _path(parents, nxt)
            if len(parents) > max_states:
                raise ValueError(
                    f"no solution within {max_states} states; use a smaller room or fewer boxes"
                )
            queue.append(nxt)
    return None


def _path(
    parents: dict[SokobanState, tuple[SokobanState, str] | None], end: SokobanState
) -> tuple[str, ...]:
    moves = []
    link = parents[end]
    while link is not None:
        previous, name = link
        moves.append(name)
        link = parents[previous]
    return tuple(reversed(moves))

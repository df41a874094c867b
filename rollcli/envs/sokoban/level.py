"""Sokoban states: an immutable room with boxes, targets and a player, drawn as a text grid.

Default symbols (`SokobanSymbols`):

``#`` wall, ``_`` floor, ``O`` empty target, ``X`` box, ``√`` box on a target,
``P`` player, ``S`` player standing on a target. ``√`` (rather than a second letter) makes
a finished box stand out; override any symbol with `SokobanSymbols`.

Example:
    >>> state = SokobanState.from_layout('''
    ...     #####
    ...     #P__#
    ...     #_XO#
    ...     #####
    ... ''')
    >>> state, pushed = state.move("Down")
    >>> state, pushed = state.move("Right")
    >>> pushed, state.player, state.solved
    (True, (2, 2), True)
    >>> print(state.render())
    #####
    #___#
    #_P√#
    #####
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from textwrap import dedent
from typing import ClassVar

from rollcli.envs.symbols import SymbolSet

Pos = tuple[int, int]
"""A cell as (row, column), row 0 at the top."""

DIRECTIONS: dict[str, Pos] = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1)}
OPPOSITE: dict[str, str] = {"Up": "Down", "Down": "Up", "Left": "Right", "Right": "Left"}


@dataclass(frozen=True)
class SokobanSymbols(SymbolSet):
    """One character per kind of cell; all seven must differ."""

    env_name: ClassVar[str] = "Sokoban"

    wall: str = "#"
    floor: str = "_"
    target: str = "O"
    box: str = "X"
    box_on_target: str = "√"
    player: str = "P"
    player_on_target: str = "S"

    def legend(self) -> str:
        """One line per symbol, for the instructions shown to the model."""
        return "\n".join(
            [
                f"{self.wall} wall",
                f"{self.floor} floor",
                f"{self.target} target (empty)",
                f"{self.box} box",
                f"{self.box_on_target} box on a target",
                f"{self.player} player",
                f"{self.player_on_target} player standing on a target",
            ]
        )


@dataclass(frozen=True)
class SokobanState:
    """A Sokoban position. Cells outside `shape` count as walls. Hashable and comparable."""

    shape: Pos
    walls: frozenset[Pos]
    targets: frozenset[Pos]
    boxes: frozenset[Pos]
    player: Pos

    @property
    def solved(self) -> bool:
        return self.boxes == self.targets

    @property
    def boxes_on_target(self) -> int:
        return len(self.boxes & self.targets)

    def is_wall(self, cell: Pos) -> bool:
        row, col = cell
        inside = 0 <= row < self.shape[0] and 0 <= col < self.shape[1]
        return not inside or cell in self.walls

    def move(self, direction: str) -> tuple[SokobanState, bool]:
        """Move the player one cell, pushing a box if one is in the way.

        Returns the new state (the same object if the move is blocked) and whether a box
        was pushed.
        """
        d_row, d_col = DIRECTIONS[direction]
        row, col = self.player
        ahead = (row + d_row, col + d_col)
        if self.is_wall(ahead):
            return self, False
        if ahead not in self.boxes:
            return replace(self, player=ahead), False
        beyond = (row + 2 * d_row, col + 2 * d_col)
        if self.is_wall(beyond) or beyond in self.boxes:
            return self, False
        boxes = (self.boxes - {ahead}) | {beyond}
        return replace(self, boxes=boxes, player=ahead), True

    def render(self, symbols: SokobanSymbols | None = None) -> str:
        """The grid as text, one line per row."""
        s = symbols or SokobanSymbols()
        lines = []
        for row in range(self.shape[0]):
            chars = []
            for col in range(self.shape[1]):
                cell = (row, col)
                on_target = cell in self.targets
                if cell in self.walls:
                    chars.append(s.wall)
                elif cell == self.player:
                    chars.append(s.player_on_target if on_target else s.player)
                elif cell in self.boxes:
                    chars.append(s.box_on_target if on_target else s.box)
                else:
                    chars.append(s.target if on_target else s.floor)
            lines.append("".join(chars))
        return "\n".join(lines)

    @classmethod
    def from_layout(cls, layout: str, symbols: SokobanSymbols | None = None) -> SokobanState:
        """Read a grid drawn with `symbols` (common indentation and blank edges ignored)."""
        s = symbols or SokobanSymbols()
        rows = [line.strip() for line in dedent(layout).strip("\n").splitlines()]
        rows = [line for line in rows if line]
        if not rows or len({len(line) for line in rows}) != 1:
            raise ValueError("a Sokoban layout needs at least one row, all of the same length")
        walls: set[tuple[int, int]] = set()
        targets: set[tuple[int, int]] = set()
        boxes: set[tuple[int, int]] = set()
        players: list[tuple[int, int]] = []
        kinds = {
            s.wall: (True, False, False, False),
            s.floor: (False, False, False, False),
            s.target: (False, True, False, False),
            s.box: (False, False, True, False),
            s.box_on_target: (False, True, True, False),
            s.player: (False, False, False, True),
            s.player_on_target: (False, True, False, True),
        }
        for r, line in enumerate(rows):
            for c, char in enumerate(line):
                if char not in kinds:
                    raise ValueError(f"unknown symbol {char!r} at row {r}, column {c}")
                wall, target, box, player = kinds[char]
                for flag, bucket in ((wall, walls), (target, targets), (box, boxes)):
                    if flag:
                        bucket.add((r, c))
                if player:
                    players.append((r, c))
        if len(players) != 1:
            raise ValueError(f"a Sokoban layout needs exactly one player, found {len(players)}")
        if not boxes or len(boxes) != len(targets):
            raise ValueError(
                f"a Sokoban layout needs as many boxes as targets (at least one), "
                f"found {len(boxes)} boxes and {len(targets)} targets"
            )
        return cls(
            shape=(len(rows), len(rows[0])),
            walls=frozenset(walls),
            targets=frozenset(targets),
            boxes=frozenset(boxes),
            player=players[0],
        )

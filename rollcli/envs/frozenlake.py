"""The `frozenlake` text environment: walk over the ice to the goal without falling in a hole.

Built on gymnasium's ``FrozenLake-v1`` (`gymnasium.envs.toy_text.frozen_lake`): every reset
draws a new map with `generate_random_map` (which only returns maps with a path from start
to goal) from a seed taken from the reset seed, unless a fixed `desc` is given. The text
rendering is our own, without ANSI colours:

``_`` frozen (the start is frozen too), ``O`` hole, ``G`` goal, ``P`` player,
``X`` player fallen in a hole, ``√`` player on the goal (see `FrozenLakeSymbols`).

Reward 1 on reaching the goal, 0 otherwise; reaching the goal or a hole ends the episode.
The progress potential (``shaping="progress"``, see `TextEnv`) is minus the length of the
shortest walk from the player to the goal over the map's safe cells (`goal_distances`); a
move into the edge of the map is a move without effect.
With ``is_slippery=True`` the player moves in the intended direction only a third of the
time (gymnasium's rule). A reply that does not parse keeps the player still and scores
`format_penalty`.

Example:
    >>> env = FrozenLakeEnv(desc=["SF", "HG"])
    >>> obs, info = env.reset(seed=0)
    >>> print(obs)
    P_
    OG
    >>> _ = env.step("<answer>Right</answer>")
    >>> obs, reward, terminated, truncated, info = env.step("<answer>Down</answer>")
    >>> print(obs)
    __
    O√
    >>> reward, terminated, info["success"]
    (1.0, True, True)

Progress shaping with gamma 0.9: the start is 2 moves from the goal, Right leaves 1, Down
reaches the goal, which ends the episode (potential 0):
    >>> env = FrozenLakeEnv(desc=["SF", "HG"], shaping="progress", shaping_gamma=0.9)
    >>> _ = env.reset(seed=0)
    >>> env.potential()
    -2.0
    >>> _, reward, *_, info = env.step("<answer>Right</answer>")  # 0 + 0.9 * -1 - (-2)
    >>> round(reward, 6), round(info["shaping"], 6)
    (1.1, 1.1)
    >>> _, reward, *_, info = env.step("<answer>Down</answer>")  # 1 + 0.9 * 0 - (-1)
    >>> round(reward, 6), round(info["shaping"], 6)
    (2.0, 1.0)
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
from gymnasium.envs.toy_text.frozen_lake import generate_random_map

from rollcli.envs.registry import register_env
from rollcli.envs.symbols import SymbolSet, grid_space, grid_text
from rollcli.envs.text_env import TextEnv, Transition

# Our action names in gymnasium's order: its action i is ACTION_NAMES[i].
ACTION_NAMES = ["Left", "Down", "Right", "Up"]
_STEPS = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
EDGE_NOTE = "Nothing happened: that move runs into the edge of the lake."

_INSTRUCTIONS = """\
You are walking on a frozen lake. Reach the goal without falling into a hole.

Symbols:
{legend}

Rules: each turn you move one cell Left, Down, Right or Up; moving into the edge of the
map leaves you where you are. Stepping on a hole ends the game with no reward; reaching
the goal ends it with reward 1.{slippery} At most {max_steps} moves.

Answer with exactly one move inside answer tags, for example <answer>Right</answer>.
Valid moves: Left, Down, Right, Up."""

# `compact_instructions=True`: the same rules in about half the tokens
_COMPACT = """\
FrozenLake: reach the goal, avoid holes ({legend}). Edges block moves.{slippery} \
At most {max_steps} moves.
Reply with one move, e.g. <answer>Right</answer>; moves: Left, Down, Right, Up."""

_SLIPPERY_NOTE = (
    " The ice is slippery: you move in the intended direction only one time in three,"
    " otherwise to one of its two sides."
)


@dataclass(frozen=True)
class FrozenLakeSymbols(SymbolSet):
    """One character per kind of cell; all six must differ."""

    env_name: ClassVar[str] = "FrozenLake"

    frozen: str = "_"
    hole: str = "O"
    goal: str = "G"
    player: str = "P"
    player_in_hole: str = "X"
    player_on_goal: str = "√"

    def legend(self) -> str:
        return "\n".join(
            [
                f"{self.frozen} frozen ice (safe)",
                f"{self.hole} hole",
                f"{self.goal} goal",
                f"{self.player} you",
                f"{self.player_in_hole} you, fallen into a hole",
                f"{self.player_on_goal} you, on the goal",
            ]
        )


@register_env("frozenlake", description="cross a random frozen lake to the goal, avoiding holes")
class FrozenLakeEnv(TextEnv):
    """FrozenLake on a text grid with a random solvable map per reset.

    Args:
        size: side of the square map drawn at each reset.
        p: probability that a drawn tile is frozen (the rest are holes); in (0, 1].
        is_slippery: gymnasium's slippery ice (moves succeed one time in three).
        desc: a fixed map in gymnasium's letters (``S`` start, ``F`` frozen, ``H`` hole,
            ``G`` goal), e.g. ``["SFF", "FHF", "FFG"]``; replaces the random maps.
        symbols: a `FrozenLakeSymbols` or a mapping of overrides.
        compact_instructions: a shorter system prompt with the same rules.
        spaced_cells: a space between the cells of a row (one token per cell).
        options: `TextEnv`'s (max_steps, format_penalty, answer_pattern, render_mode,
            shaping, shaping_gamma, no_effect_feedback, no_effect_penalty, layouts).
    """

    action_names = ACTION_NAMES

    def __init__(
        self,
        size: int = 4,
        p: float = 0.8,
        is_slippery: bool = False,
        desc: list[str] | None = None,
        symbols: FrozenLakeSymbols | Mapping[str, str] | None = None,
        compact_instructions: bool = False,
        spaced_cells: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if desc is None and size < 2:
            raise ValueError(f"size must be at least 2, got {size}")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"p (the chance a tile is frozen) must be in (0, 1], got {p}")
        self.size = len(desc) if desc is not None else int(size)
        self.p = float(p)
        self.is_slippery = bool(is_slippery)
        self.compact_instructions = bool(compact_instructions)
        self.spaced_cells = bool(spaced_cells)
        self.fixed_desc = list(desc) if desc is not None else None
        self.symbols = FrozenLakeSymbols.coerce(symbols)
        rows, cols = self.size, len(desc[0]) if desc is not None else self.size
        self.observation_space = grid_space(self.symbols, rows, cols, self.spaced_cells)
        self.desc: list[str] | None = None
        self._lake: GymFrozenLake | None = None
        self._position = 0
        self._distances: dict[tuple[int, int], int] = {}

    @property
    def instructions(self) -> str:
        if self.compact_instructions:
            return _COMPACT.format(
                legend=", ".join(self.symbols.legend().splitlines()),
                slippery=" Slippery: a move goes sideways 2 times in 3."
                if self.is_slippery
                else "",
                max_steps=self.max_steps,
            )
        return _INSTRUCTIONS.format(
            legend=self.symbols.legend(),
            slippery=_SLIPPERY_NOTE if self.is_slippery else "",
            max_steps=self.max_steps,
        )

    @property
    def position(self) -> tuple[int, int]:
        """The player's (row, column)."""
        return divmod(self._position, len(self._require_desc()[0]))

    def render_text(self) -> str:
        desc = self._require_desc()
        player = self.position
        s = self.symbols
        lines = []
        for r, line in enumerate(desc):
            chars = []
            for c, tile in enumerate(line):
                if (r, c) == player:
                    chars.append({"H": s.player_in_hole, "G": s.player_on_goal}.get(tile, s.player))
                else:
                    chars.append({"H": s.hole, "G": s.goal}.get(tile, s.frozen))
            lines.append("".join(chars))
        return grid_text(lines, self.spaced_cells)

    def _start(self, options: dict[str, Any]) -> None:
        map_seed, lake_seed = (int(n) for n in self.np_random.integers(2**31, size=2))
        if self.fixed_desc is not None:
            self.desc = self.fixed_desc
        else:
            self.desc = generate_random_map(size=self.size, p=self.p, seed=map_seed)
        self._lake = GymFrozenLake(desc=self.desc, is_slippery=self.is_slippery)
        position, _ = self._lake.reset(seed=lake_seed)
        self._position = int(position)
        self._distances = goal_distances(self.desc)

    def _apply(self, action: str) -> Transition:
        assert self._lake is not None
        before = self._position
        position, reward, terminated, _, _ = self._lake.step(ACTION_NAMES.index(action))
        self._position = int(position)
        row, col = self.position
        success = self._require_desc()[row][col] == "G"
        effective = self._position != before
        return Transition(
            reward=float(reward),
            effective=effective,
            terminated=bool(terminated),
            success=success,
            note="" if effective else EDGE_NOTE,
        )

    def potential(self) -> float:
        """Minus the number of moves from the player to the goal over safe cells."""
        return -float(self._distances[self.position])

    def layout_key(self) -> str | None:
        return None if self.fixed_desc is not None else "\n".join(self._require_desc())

    def expert_action(self) -> str:
        """A first move of a shortest safe walk to the goal, chosen at random (from the
        episode's seed) among ties (`roll data episodes --policy expert`); on slippery ice it
        is the intended move, not a safe plan."""
        row, col = self.position
        here = self._distances[(row, col)]
        closer = [
            name
            for name, (d_row, d_col) in _STEPS.items()
            if self._distances.get((row + d_row, col + d_col), here) < here
        ]
        if not closer:
            raise RuntimeError(f"no move brings the player at {(row, col)} closer to the goal")
        return closer[int(self.np_random.integers(len(closer)))]

    def _require_desc(self) -> list[str]:
        if self.desc is None:
            raise RuntimeError("call reset() first")
        return self.desc


def goal_distances(desc: list[str]) -> dict[tuple[int, int], int]:
    """Moves from each cell to the goal walking on safe cells only (start, frozen, goal),
    by breadth-first search back from the goal; cells that cannot reach it are left out.

    >>> goal_distances(["SF", "HG"])
    {(1, 1): 0, (0, 1): 1, (0, 0): 2}
    """
    goal = next((r, c) for r, line in enumerate(desc) for c, tile in enumerate(line) if tile == "G")
    distances = {goal: 0}
    queue = deque([goal])
    while queue:
        row, col = queue.popleft()
        for d_row, d_col in _STEPS.values():
            r, c = row + d_row, col + d_col
            inside = 0 <= r < len(desc) and 0 <= c < len(desc[r])
            if inside and desc[r][c] != "H" and (r, c) not in distances:
                distances[(r, c)] = distances[(row, col)] + 1
                queue.append((r, c))
    return distances

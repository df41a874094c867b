"""The `sokoban` text environment: push every box onto a target.

Rewards per step: `step_penalty` (-0.1) always; +1 for each box pushed onto a target and
-1 for each box pushed off one; `success_reward` (+10) when the last box reaches its
target, which ends the episode. A reply that does not parse leaves the room as it was and
scores `step_penalty + format_penalty`. After `max_steps` steps the episode is truncated.

The progress potential (``shaping="progress"``, see `TextEnv`) is minus the sum over boxes
of the Manhattan distance to the nearest target (walls ignored: the usual cheap Sokoban
heuristic); walking into a wall, or pushing a box against a wall or another box, is a move
without effect.

Example:
    >>> env = SokobanEnv(layout='''
    ...     #####
    ...     #P__#
    ...     #_XO#
    ...     #####
    ... ''')
    >>> obs, info = env.reset(seed=0)
    >>> obs, reward, terminated, truncated, info = env.step("<answer>Down</answer>")
    >>> round(reward, 2), info["action_is_effective"]
    (-0.1, True)
    >>> obs, reward, terminated, truncated, info = env.step("<answer>right</answer>")
    >>> round(reward, 2), terminated, info["success"]
    (10.9, True, True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rollcli.envs.registry import register_env
from rollcli.envs.sokoban.generator import generate_level
from rollcli.envs.sokoban.level import DIRECTIONS, SokobanState, SokobanSymbols
from rollcli.envs.sokoban.solver import solve
from rollcli.envs.symbols import grid_space, grid_text
from rollcli.envs.text_env import TextEnv, Transition

WALL_NOTE = "Nothing happened: there is a wall {where}."
BLOCKED_NOTE = "Nothing happened: the box {where} cannot move, a wall or a box is behind it."
_WHERE = {"Up": "above you", "Down": "below you", "Left": "to your left", "Right": "to your right"}

_INSTRUCTIONS = """\
You are solving a Sokoban puzzle. Push every box onto a target.

Symbols:
{legend}

Rules: each turn you move the player one cell Up, Down, Left or Right. Walking into a box
pushes it one cell further in the same direction, but only if that cell is floor or an
empty target (not a wall or another box). Boxes cannot be pulled, so a box pushed into a
corner is stuck for good. The puzzle is solved when every box is on a target.

Rewards: {step_penalty:g} per move, +1 for pushing a box onto a target, -1 for pushing one
off a target, +{success_reward:g} when solved. At most {max_steps} moves.

Answer with exactly one move inside answer tags, for example <answer>Left</answer>.
Valid moves: Up, Down, Left, Right."""

# `compact_instructions=True`: the same rules in about half the tokens
_COMPACT = """\
Sokoban: push every box onto a target ({legend}). Walking into a box pushes it if the \
cell behind is free; boxes cannot be pulled. Rewards: {step_penalty:g} per move, +1 box \
on target, -1 box off, +{success_reward:g} solved. At most {max_steps} moves.
Reply with one move, e.g. <answer>Left</answer>; moves: Up, Down, Left, Right."""


@register_env("sokoban", description="push boxes onto targets in a random solvable room")
class SokobanEnv(TextEnv):
    """Sokoban on a text grid, with random solvable levels or a fixed `layout`.

    Args:
        dim_room: room size (rows, columns) including the outer walls.
        num_boxes: boxes (and targets) per generated level.
        layout: a fixed level drawn with `symbols` instead of generated ones.
        symbols: a `SokobanSymbols` or a mapping of overrides, e.g. ``{"floor": "."}``.
        step_penalty: reward added on every step.
        success_reward: reward added when the puzzle is solved.
        reverse_steps: reverse moves the generator plays per attempt.
        compact_instructions: a shorter system prompt with the same rules.
        spaced_cells: a space between the cells of a row (one token per cell).
        options: `TextEnv`'s (max_steps, format_penalty, answer_pattern, render_mode,
            shaping, shaping_gamma, no_effect_feedback, no_effect_penalty, layouts).
    """

    action_names = list(DIRECTIONS)

    def __init__(
        self,
        dim_room: tuple[int, int] = (6, 6),
        num_boxes: int = 1,
        layout: str | None = None,
        symbols: SokobanSymbols | Mapping[str, str] | None = None,
        step_penalty: float = -0.1,
        success_reward: float = 10.0,
        reverse_steps: int = 100,
        compact_instructions: bool = False,
        spaced_cells: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.symbols = SokobanSymbols.coerce(symbols)
        self.fixed_state = (
            None if layout is None else SokobanState.from_layout(layout, self.symbols)
        )
        self.dim_room = tuple(dim_room) if self.fixed_state is None else self.fixed_state.shape
        self.num_boxes = num_boxes
        self.step_penalty = float(step_penalty)
        self.success_reward = float(success_reward)
        self.reverse_steps = reverse_steps
        self.compact_instructions = bool(compact_instructions)
        self.spaced_cells = bool(spaced_cells)
        rows, cols = self.dim_room
        self.observation_space = grid_space(self.symbols, rows, cols, self.spaced_cells)
        self.state: SokobanState | None = None
        self.solution: tuple[str, ...] | None = None
        """Moves that solve the current generated level from its start (None for a layout)."""

    @property
    def instructions(self) -> str:
        template = _COMPACT if self.compact_instructions else _INSTRUCTIONS
        legend = self.symbols.legend()
        return template.format(
            legend=", ".join(legend.splitlines()) if self.compact_instructions else legend,
            step_penalty=self.step_penalty,
            success_reward=self.success_reward,
            max_steps=self.max_steps,
        )

    @property
    def idle_reward(self) -> float:
        return self.step_penalty

    def render_text(self) -> str:
        if self.state is None:
            raise RuntimeError("call reset() first")
        return grid_text(self.state.render(self.symbols).split("\n"), self.spaced_cells)

    def _start(self, options: dict[str, Any]) -> None:
        if self.fixed_state is not None:
            self.state, self.solution = self.fixed_state, None
        else:
            rows, cols = self.dim_room
            level = generate_level(
                (rows, cols),
                self.num_boxes,
                seed=int(self.np_random.integers(2**63)),
                reverse_steps=self.reverse_steps,
            )
            self.state, self.solution = level.state, level.solution

    def _apply(self, action: str) -> Transition:
        assert self.state is not None
        before = self.state
        self.state, _ = before.move(action)
        reward = self.step_penalty + (self.state.boxes_on_target - before.boxes_on_target)
        solved = self.state.solved
        if solved:
            reward += self.success_reward
        effective = self.state != before
        return Transition(
            reward=reward,
            effective=effective,
            terminated=solved,
            success=solved,
            note="" if effective else _blocked_note(before, action),
        )

    def potential(self) -> float:
        """Minus the sum of each box's Manhattan distance to its nearest target."""
        assert self.state is not None
        targets = self.state.targets
        return -float(
            sum(min(abs(r - tr) + abs(c - tc) for tr, tc in targets) for r, c in self.state.boxes)
        )

    def layout_key(self) -> str | None:
        """The room, targets and boxes at the start (not where the player stands)."""
        if self.fixed_state is not None or self.state is None:
            return None
        s = self.state
        return repr((sorted(s.walls), sorted(s.targets), sorted(s.boxes)))

    def expert_action(self) -> str:
        """The first move of a shortest solution from here (`roll data episodes --policy
        expert`), found by `solve`."""
        assert self.state is not None
        moves = solve(self.state)
        if not moves:
            raise RuntimeError("no solution from this position (a box is stuck)")
        return moves[0]

    def _extra_info(self) -> dict[str, Any]:
        assert self.state is not None
        return {
            "boxes_on_target": self.state.boxes_on_target,
            "num_boxes": len(self.state.boxes),
        }


def _blocked_note(state: SokobanState, action: str) -> str:
    """Why `action` from `state` moved nothing: a wall, or a box that cannot move."""
    d_row, d_col = DIRECTIONS[action]
    ahead = (state.player[0] + d_row, state.player[1] + d_col)
    where = _WHERE[action]
    return (
        WALL_NOTE.format(where=where) if state.is_wall(ahead) else BLOCKED_NOTE.format(where=where)
    )

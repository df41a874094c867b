"""What a slippery-FrozenLake policy does beside holes, read from its transcripts.

    .venv/bin/python bench/frozenlake_moves.py episodes.jsonl     # `roll data episodes` rows

Each turn's observation is the grid the model saw (`P` where it stands, `O` holes); its reply
names a move. On slippery ice a move goes its way one time in three and to either side one
time in three each (gymnasium's rule), so a move has a chance of sliding into a hole. For
every turn on a square where some move is safer than another, it counts whether the policy
took a move of the least risk ("careful") and the mean risk of its moves. The demonstrator's
moves (a shortest walk as if the ice held) are the comparison: `careful_share` is what RL
adds when it learns to keep away from holes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

MOVES = {"Left": (0, -1), "Down": (1, 0), "Right": (0, 1), "Up": (-1, 0)}
SIDES = {"Left": ("Up", "Down"), "Right": ("Up", "Down"), "Up": ("Left", "Right"),
         "Down": ("Left", "Right")}  # fmt: skip
MOVE = re.compile(r"<answer>\s*([A-Za-z]+)")


def parse_grid(observation: str) -> tuple[list[list[str]], tuple[int, int]] | None:
    """The grid's cells and the player's square, from an observation's grid lines."""
    rows = [line.split() for line in observation.splitlines()]
    rows = [r for r in rows if r and all(len(c) == 1 for c in r)]
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    for i, row in enumerate(rows):
        if "P" in row:
            return rows, (i, row.index("P"))
    return None


def slide_risk(grid: list[list[str]], at: tuple[int, int], move: str) -> float:
    """P(the move ends in a hole): its own way and its two sides, a third each."""
    size_r, size_c = len(grid), len(grid[0])
    risk = 0.0
    for way in (move, *SIDES[move]):
        dr, dc = MOVES[way]
        r = min(max(at[0] + dr, 0), size_r - 1)
        c = min(max(at[1] + dc, 0), size_c - 1)
        risk += (grid[r][c] == "O") / 3
    return risk


def turn_moves(messages: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(risk of the move taken, least risk of any move) on each turn whose square has moves
    of different risk."""
    out = []
    for obs, reply in zip(messages, messages[1:], strict=False):
        if obs["role"] != "user" or reply["role"] != "assistant":
            continue
        parsed, found = parse_grid(obs["content"]), MOVE.findall(reply["content"])
        if parsed is None or not found or found[-1] not in MOVES:
            continue
        grid, at = parsed
        risks = {m: slide_risk(grid, at, m) for m in MOVES}
        if max(risks.values()) > min(risks.values()):
            out.append((risks[found[-1]], min(risks.values())))
    return out


def summary(conversations: list[list[dict[str, Any]]]) -> dict[str, float]:
    """`careful_share`: turns where the move taken had the least risk; `mean_risk`."""
    turns = [t for messages in conversations for t in turn_moves(messages)]
    if not turns:
        return {"turns": 0, "careful_share": 0.0, "mean_risk": 0.0}
    careful = sum(taken <= least + 1e-9 for taken, least in turns)
    return {
        "turns": len(turns),
        "careful_share": careful / len(turns),
        "mean_risk": sum(taken for taken, _ in turns) / len(turns),
    }


def main() -> None:
    rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines() if line]
    print(json.dumps(summary([row["messages"] for row in rows])))


if __name__ == "__main__":
    main()

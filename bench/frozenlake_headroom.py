"""Headroom on slippery FrozenLake: what the best policy reaches against the demonstrator.

    .venv/bin/python bench/frozenlake_headroom.py                   # 4x4, 10 moves, 500 maps
    .venv/bin/python bench/frozenlake_headroom.py --size 5 --max-steps 14

Exact, no sampling: on each held-out map (drawn as `frozenlake` draws them, from reset seeds
no training run uses) finite-horizon dynamic programming over gymnasium's own transition
table gives each policy's probability of reaching the goal within `--max-steps` moves:

    best          value iteration: the best success any policy has on that map
    demonstrator  the env's expert (`roll data episodes --policy expert`): a first move of a
                  shortest safe walk, uniform among ties, as if the ice did not slip
    random        a uniform move each turn
    careful       a rule, not a solver: the moves least likely to slide into a hole, and
                  of those the ones that end closest to the goal on average

The headroom is best - demonstrator, averaged over the maps; issue #85 builds a task only
where it is at least 0.15. The last line is `headroom: H.HHH`.
"""

from __future__ import annotations

import argparse
import statistics

from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake

from rollcli.envs.frozenlake import FrozenLakeEnv, goal_distances

HELD_OUT_SEED = 10_000_000  # reset seeds from here on: far from a run's training seeds
MOVES = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}  # gymnasium: Left, Down, Right, Up


def success(desc: list[str], policy: str, horizon: int, slippery: bool = True) -> float:
    """P(reach the goal within `horizon` moves) from the start, under `policy`."""
    lake = GymFrozenLake(desc=desc, is_slippery=slippery)
    table = lake.unwrapped.P
    tiles = "".join(desc)
    value = [1.0 if t == "G" else 0.0 for t in tiles]  # 0 moves left
    for _ in range(horizon):
        new = []
        for s, tile in enumerate(tiles):
            if tile in "GH":  # the episode has ended there
                new.append(value[s])
                continue
            q = {a: sum(p * value[nxt] for p, nxt, _, _ in table[s][a]) for a in MOVES}
            if policy == "best":
                new.append(max(q.values()))
            else:
                chosen = fixed_moves(desc, table, s, policy)
                new.append(sum(q[a] for a in chosen) / len(chosen) if chosen else 0.0)
        value = new
    return value[tiles.index("S")]


def fixed_moves(desc: list[str], table: dict, s: int, policy: str) -> list[int]:
    """The moves `policy` picks among (uniformly) on square `s`; not for `best`."""
    cols, tiles = len(desc[0]), "".join(desc)
    distances = goal_distances(desc)
    if policy == "random":
        return list(MOVES)
    if policy == "careful":

        def risk_then_distance(a: int) -> tuple[float, float]:
            outcomes = table[s][a]
            risk = sum(p for p, nxt, _, _ in outcomes if tiles[nxt] == "H")
            ahead = sum(
                p * distances.get(divmod(nxt, cols), 99)
                for p, nxt, _, _ in outcomes
                if tiles[nxt] != "H"
            )
            return round(risk, 9), round(ahead, 9)

        best = min(risk_then_distance(a) for a in MOVES)
        return [a for a in MOVES if risk_then_distance(a) == best]
    row, col = divmod(s, cols)
    here = distances.get((row, col))
    return [
        a
        for a, (dr, dc) in MOVES.items()
        if here is not None and distances.get((row + dr, col + dc), here) < here
    ]


def expected_moves(desc: list[str], policy: str, horizon: int) -> float:
    """The mean number of moves an episode of `policy` takes (it ends at a hole, the goal
    or the turn limit)."""
    table = GymFrozenLake(desc=desc, is_slippery=True).unwrapped.P
    tiles = "".join(desc)
    where = [0.0] * len(tiles)
    where[tiles.index("S")] = 1.0
    moves = 0.0
    for _ in range(horizon):
        after = [0.0] * len(tiles)
        for s, mass in enumerate(where):
            if mass == 0 or tiles[s] in "GH":
                continue
            moves += mass
            chosen = fixed_moves(desc, table, s, policy) or list(MOVES)
            for a in chosen:
                for p, nxt, _, _ in table[s][a]:
                    after[nxt] += mass * p / len(chosen)
        where = after
    return moves


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--p", type=float, default=0.8, help="chance a tile is frozen")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--maps", type=int, default=500)
    parser.add_argument("--first-seed", type=int, default=HELD_OUT_SEED, help="reset seeds from")
    args = parser.parse_args()
    env = FrozenLakeEnv(size=args.size, p=args.p, is_slippery=True)
    rates: dict[str, list[float]] = {"best": [], "demonstrator": [], "random": [], "careful": []}
    moves: dict[str, list[float]] = {"demonstrator": [], "random": [], "careful": []}
    for i in range(args.maps):
        env.reset(seed=args.first_seed + i)
        desc = list(env.desc)
        for policy, values in rates.items():
            values.append(success(desc, policy, args.max_steps))
        for policy, values in moves.items():
            values.append(expected_moves(desc, policy, args.max_steps))
    print(
        f"slippery FrozenLake {args.size}x{args.size}, p {args.p}, {args.max_steps} moves, "
        f"{args.maps} held-out maps (exact success per map, then the mean)"
    )
    print("| policy | mean success | mean moves | maps where best > demonstrator + 0.05 |")
    print("| --- | ---: | ---: | ---: |")
    gaps = [b - d for b, d in zip(rates["best"], rates["demonstrator"], strict=True)]
    for policy, values in rates.items():
        wins = sum(g > 0.05 for g in gaps) if policy == "best" else ""
        mean_moves = f"{statistics.mean(moves[policy]):.1f}" if policy in moves else ""
        print(f"| {policy} | {statistics.mean(values):.3f} | {mean_moves} | {wins} |")
    print(f"headroom: {statistics.mean(gaps):.3f}")


if __name__ == "__main__":
    main()

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
    cols = len(desc[0])
    distances = goal_distances(desc)
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
            elif policy == "random":
                new.append(sum(q.values()) / len(q))
            else:
                row, col = divmod(s, cols)
                here = distances.get((row, col))
                closer = [
                    a
                    for a, (dr, dc) in MOVES.items()
                    if here is not None and distances.get((row + dr, col + dc), here) < here
                ]
                new.append(sum(q[a] for a in closer) / len(closer) if closer else 0.0)
        value = new
    return value[tiles.index("S")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--p", type=float, default=0.8, help="chance a tile is frozen")
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--maps", type=int, default=500)
    parser.add_argument("--first-seed", type=int, default=HELD_OUT_SEED, help="reset seeds from")
    args = parser.parse_args()
    env = FrozenLakeEnv(size=args.size, p=args.p, is_slippery=True)
    rates: dict[str, list[float]] = {"best": [], "demonstrator": [], "random": []}
    for i in range(args.maps):
        env.reset(seed=args.first_seed + i)
        desc = list(env.desc)
        for policy, values in rates.items():
            values.append(success(desc, policy, args.max_steps))
    print(
        f"slippery FrozenLake {args.size}x{args.size}, p {args.p}, {args.max_steps} moves, "
        f"{args.maps} held-out maps (exact success per map, then the mean)"
    )
    print("| policy | mean success | maps where best > demonstrator + 0.05 |")
    print("| --- | ---: | ---: |")
    gaps = [b - d for b, d in zip(rates["best"], rates["demonstrator"], strict=True)]
    for policy, values in rates.items():
        wins = sum(g > 0.05 for g in gaps) if policy == "best" else ""
        print(f"| {policy} | {statistics.mean(values):.3f} | {wins} |")
    print(f"headroom: {statistics.mean(gaps):.3f}")


if __name__ == "__main__":
    main()

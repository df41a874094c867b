"""Multi-turn rollout speed with and without the hf engine's per-episode KV sessions.

    .venv/bin/python bench/agentic_turns.py                       # smollm2-135m, a recipe step per env
    .venv/bin/python bench/agentic_turns.py --groups 2 --rounds 1  # 2 groups of 8 episodes per env
    .venv/bin/python bench/agentic_turns.py --model tiny-random --envs frozenlake --rounds 1

Each env plays the first training step's episodes of its recipe (`agentic-frozenlake`,
`agentic-sokoban`: the same seeds, env settings, turn and token limits, sampling at the
recipe's temperature with the same seed) through the pipeline's own scheduler
(`play_episodes`), once with sessions (a turn prefills only its new tokens) and once
without (every turn prefills the whole conversation), alternating within a round; each
keeps its best round. The model is loaded and warmed up before any timing. `--groups N`
plays N groups (maps or rooms) instead of the recipe's `agentic.groups_per_step`.

The last line is the speed-up of turns/s per env.
"""

from __future__ import annotations

import argparse
import sys
import time

from rich.console import Console
from rich.table import Table

from rollcli.config.loader import load_recipe
from rollcli.models.loading import resolve_model
from rollcli.rollout.agentic_setup import env_kwargs, limits, model_context, train_specs
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode_scheduler import ModelPolicy, play_episodes
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.env_worker import EnvArgs, EnvWorker

RECIPES = {"frozenlake": "agentic-frozenlake", "sokoban": "agentic-sokoban"}


def play(worker: ActorInferWorker, path: str, recipe: str, sessions: bool, groups: int) -> dict:
    """One step's episodes of `recipe` (`groups` groups of them, 0: the recipe's); the
    counts and the wall time."""
    cfg, _ = load_recipe(recipe, [f"agentic.groups_per_step={groups}"] if groups else [])
    ag, r = cfg.agentic, cfg.rollout
    hosts = [EnvWorker(EnvArgs(ag.env, env_kwargs(ag))) for _ in range(ag.num_env_workers)]
    fmt = TurnFormat(worker.tokenizer, hosts[0].instructions(), ag.reply_prefix, ag.user_suffix)
    params = SamplingParams(
        n=1, max_new_tokens=r.max_new_tokens, temperature=r.temperature, seed=cfg.seed
    )
    policy = ModelPolicy([worker], params, sessions=sessions)
    lim = limits(ag, r.max_new_tokens, model_context(path))
    start = time.perf_counter()
    episodes, stats = play_episodes(hosts, policy, train_specs(ag, cfg.seed, 1), fmt, lim)
    seconds = time.perf_counter() - start
    return {
        "episodes": len(episodes),
        "turns": sum(ep.turns for ep in episodes),
        "system": len(fmt.encode(fmt.system_prompt)),
        "prefill": stats["prefill_tokens"],
        "reused": stats["prefix_hit_tokens"],
        "misses": stats.get("turn_cache_misses", 0.0),
        "seconds": seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--envs", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--groups", type=int, default=0, help="groups per env (0: the recipe's)")
    args = ap.parse_args()

    path = str(resolve_model(args.model))
    worker = ActorInferWorker(ActorInferArgs(path, num_threads=args.threads, session_mib=1024))
    worker.generate([[1] * 64], SamplingParams(max_new_tokens=4))  # warm up
    table = Table(title=f"multi-turn rollout, {args.model}, best of {args.rounds} rounds")
    for col in ("env", "sessions", "episodes", "turns", "system prompt", "prefilled", "reused"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for col in ("misses", "s", "turns/s", "episodes/min", "x"):
        table.add_column(col, justify="right")
    speedups = []
    for env in args.envs:
        best: dict[bool, dict] = {}
        for _ in range(args.rounds):
            for sessions in (False, True):
                run = play(worker, path, RECIPES[env], sessions, args.groups)
                print(f"{env} sessions={sessions}: {run}", file=sys.stderr, flush=True)
                if sessions not in best or run["seconds"] < best[sessions]["seconds"]:
                    best[sessions] = run
        base = best[False]["turns"] / best[False]["seconds"]
        for sessions in (False, True):
            run = best[sessions]
            rate = run["turns"] / run["seconds"]
            table.add_row(
                env,
                "on" if sessions else "off",
                str(run["episodes"]),
                str(run["turns"]),
                str(run["system"]),
                f"{run['prefill']:.0f}",
                f"{run['reused']:.0f}",
                f"{run['misses']:.0f}" if sessions else "",
                f"{run['seconds']:.1f}",
                f"{rate:.2f}",
                f"{60 * run['episodes'] / run['seconds']:.1f}",
                f"{rate / base:.2f}",
            )
        speedups.append(f"{env} {best[True]['turns'] / best[True]['seconds'] / base:.2f}x")
    Console(width=160).print(table)
    print("turns/s with sessions / without: " + ", ".join(speedups))


if __name__ == "__main__":
    main()

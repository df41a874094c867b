"""The warm-up screen of an agentic recipe: which SFT on its demonstrations is strongest.

    .venv/bin/python bench/warmup_screen.py agentic-frozenlake-slippery \\
        --episodes 800,1600 --lr 5e-5,1e-4 --steps 24,48 --out screen.json

Configurations are episodes x lr x steps. For each data amount the recipe's warm-up policy
plays its episodes once, on training maps from seed 0 (what the recipe's own warm-up plays).
For each (episodes, lr) the recipe's own warm-up sub-run (`warmup_recipe`, the sft recipe
`roll train` runs) trains for the largest step count and keeps a checkpoint at every
screened count: the lr is constant and the batches do not depend on the step count, so the
checkpoint at step s is the s-step warm-up. Each checkpoint plays `--val` greedy episodes on
validation maps from seed `--val-seed` (default 2,000,000: apart from the run's own
validation and the held-out test, both from 1,000,000). The JSON is written after every
checkpoint; a rerun reuses the runs and evaluations it holds. The last line names the best.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def config_key(episodes: int, lr: float, steps: int) -> str:
    """One configuration's name in the JSON, e.g. `e1600-lr5e-05-s48`."""
    return f"e{episodes}-lr{lr:g}-s{steps}"


def play(recipe: Any, episodes: int, folder: Path) -> Path:
    """The demonstrations of `episodes` episodes, played once into `folder`."""
    from rollcli.launch.scripted_episodes import write_episodes

    path = folder / f"demos-{episodes}.jsonl"
    if not path.exists():
        assert recipe.warmup is not None
        print(f"playing {episodes} {recipe.warmup.policy} episodes", file=sys.stderr)
        write_episodes(recipe, path, policy=recipe.warmup.policy, n=episodes, seed=0)
    return path


def train(recipe: Any, demos: Path, folder: Path, steps: list[int]) -> tuple[Path, float]:
    """The recipe's warm-up on `demos` for max(steps), a checkpoint kept at each of
    `steps`, through `roll train`; returns its run folder and wall minutes."""
    from rollcli.launch.warmup import warmup_recipe

    run_id = demos.stem.replace("demos", f"sft-lr{recipe.warmup.lr:g}")
    every = steps[0]
    if any(s % every for s in steps):
        raise SystemExit(f"--steps {steps}: each must be a multiple of the smallest")
    sft = warmup_recipe(recipe, demos, folder)
    run = sft.run.model_copy(
        update={"run_id": run_id, "save_every": every, "keep_last": 99, "keep_optimizer": "last"}
    )
    sft = sft.model_copy(update={"name": run_id, "run": run})
    spec = folder / f"{run_id}.yaml"
    spec.write_text(yaml.safe_dump(sft.model_dump(mode="json"), sort_keys=False))
    folder_run = folder / run_id
    status = folder_run / "status.json"
    start = time.perf_counter()
    if not status.exists() or json.loads(status.read_text()).get("status") != "finished":
        cmd = [sys.executable, "-m", "rollcli", "train", str(spec)]
        if folder_run.exists():
            cmd += ["--resume", "auto"]
        print(" ".join(cmd), file=sys.stderr, flush=True)
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    record = json.loads(status.read_text())
    wall = record.get("finished", 0) - record.get("started", 0) or time.perf_counter() - start
    return folder_run, wall / 60


def success(recipe: Any, model: Path, n: int, seed: int) -> list[int]:
    """1 / 0 per greedy validation episode of `model`, seeds `seed .. seed + n - 1`."""
    from rollcli.evaluation.agentic_eval import evaluate

    result = evaluate(
        recipe.agentic, str(model), str(model), n=n, seed=seed,
        max_new_tokens=recipe.rollout.max_new_tokens, num_threads=os.cpu_count() or 1,
    )  # fmt: skip
    return [int(row["success"]) for row in result.rows()]


def table(configs: dict[str, dict[str, Any]]) -> list[str]:
    from rollcli.evaluation.stats import wilson_interval

    lines = [
        "| episodes | lr | steps | success | 95% CI | sft min |",
        "| ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for c in configs.values():
        wins, n = sum(c["success"]), len(c["success"])
        lo, hi = wilson_interval(wins, n)
        lines.append(
            f"| {c['episodes']} | {c['lr']:g} | {c['steps']} | {wins / n:.3f} | "
            f"{lo:.3f}-{hi:.3f} | {c['sft_min']:.1f} |"
        )
    return lines


def main() -> None:
    from rollcli.config.loader import load_recipe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--episodes", default="800,1600", help="comma-separated data amounts")
    ap.add_argument("--lr", default="5e-5,1e-4", help="comma-separated learning rates")
    ap.add_argument("--steps", default="24,48", help="comma-separated sft step counts")
    ap.add_argument("--val", type=int, default=200, help="validation episodes per config")
    ap.add_argument("--val-seed", type=int, default=2_000_000)
    ap.add_argument("--dir", type=Path, default=ROOT / "runs" / "warmup-screen")
    ap.add_argument("--out", type=Path, help="the JSON (default DIR/screen.json)")
    ap.add_argument("--set", nargs="*", default=[], help="recipe overrides, key.path=value")
    args = ap.parse_args()
    episodes = [int(e) for e in args.episodes.split(",")]
    lrs = [float(x) for x in args.lr.split(",")]
    steps = sorted(int(s) for s in args.steps.split(","))
    if len(episodes) * len(lrs) * len(steps) > 8:
        raise SystemExit("at most 8 configurations (issue #85's screen)")
    args.dir.mkdir(parents=True, exist_ok=True)
    out = args.out or args.dir / "screen.json"
    data: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    from learning import _machine

    data.update(recipe=args.recipe, set=args.set, machine=_machine(), val_seed=args.val_seed)
    data.setdefault("configs", {})
    for n_episodes in episodes:
        for lr in lrs:
            sets = [*args.set, f"warmup.episodes={n_episodes}", f"warmup.lr={lr}"]
            recipe, _ = load_recipe(args.recipe, [*sets, f"warmup.steps={steps[-1]}"])
            demos = play(recipe, n_episodes, args.dir)
            run, minutes = train(recipe, demos, args.dir, steps)
            for s in steps:
                key = config_key(n_episodes, lr, s)
                if key in data["configs"] and len(data["configs"][key]["success"]) == args.val:
                    continue
                model = run / "checkpoints" / f"step-{s}"
                print(f"{key}: {args.val} validation episodes", file=sys.stderr, flush=True)
                data["configs"][key] = {
                    "episodes": n_episodes, "lr": lr, "steps": s, "checkpoint": str(model),
                    "sft_min": minutes * s / steps[-1],
                    "success": success(recipe, model, args.val, args.val_seed),
                }  # fmt: skip
                out.write_text(json.dumps(data, indent=1))
    print("\n".join(table(data["configs"])))
    best = max(data["configs"].values(), key=lambda c: sum(c["success"]))
    data["best"] = config_key(best["episodes"], best["lr"], best["steps"])
    out.write_text(json.dumps(data, indent=1))
    rate = sum(best["success"]) / len(best["success"])
    print(f"best: {data['best']} (validation success {rate:.3f}); JSON: {out}")


if __name__ == "__main__":
    main()

"""Learning regression: train an rlvr recipe over several seeds and test what it learned.

    .venv/bin/python bench/learning.py rlvr-math --seeds 9        # seeds 1-8 and the recipe's
    .venv/bin/python bench/learning.py rlvr-math --only 2,3 --set train.lr=2e-5

Each seed trains the recipe through the real CLI (`roll train RECIPE --seed S`, its stderr
passed through: progress lines at each tenth of the run and at least every 30 s), then its
final checkpoint and the base model answer the seed's held-out problems (the run's own
validation set, `data.val_size` of them, greedy), asked two ways:

- (a) as the recipe asks (its `data.system_prompt` and `data.prompt_suffix`);
- (b) with a `\\boxed{}` instruction as `data.prompt_suffix` instead (`--boxed-suffix`).

Per seed and overall it prints accuracy with 95% Wilson intervals, exact McNemar p-values
paired on the same problems, the run's validation curve, collapse flags (replies shrunk to
under half their step-1 length, final validation below step 0) and wall time. Issue #36's
targets for every seed: (a) trained >= 2x base with p < 0.05 and never below step 0;
(b) trained not significantly worse than base (p >= 0.05 or better); (c) trained asked as in
(a) beats base asked as in (b) with p < 0.05. The last line is the count of seeds that meet
all three. Answers are cached (the base model's per seed in the runs folder, a run's in its
folder) and finished runs are not trained again, so a second call only prints.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BOXED = "Put the final answer in \\boxed{}."
ALPHA = 0.05


def parse_seeds(count: int, only: str | None, recipe_seed: int) -> list[int]:
    """`--seeds 9`: seeds 1-8 and the recipe's own; `--only 2,5`: those seeds.

    >>> parse_seeds(3, None, 42), parse_seeds(9, "4,7", 42)
    ([1, 2, 42], [4, 7])
    """
    if only:
        return [int(s) for s in only.split(",") if s]
    return [*range(1, count), recipe_seed]


def train(recipe: str, seed: int, sets: list[str], runs_dir: Path, tag: str) -> dict[str, Any]:
    """One run through the real CLI; returns its id, wall time and metrics rows."""
    run_id = f"learn-{tag}-s{seed}"
    run = runs_dir / run_id
    start = time.perf_counter()
    if not (run / "status.json").exists() or _status(run) != "finished":
        cmd = [sys.executable, "-m", "rollcli", "train", recipe, "--seed", str(seed)]
        cmd += ["--runs-dir", str(runs_dir), "--run-id", run_id, *sets]
        if run.exists():
            cmd += ["--resume", "auto"]
        code, tail = _run_passing_stderr(cmd)
        if code != 0:
            raise SystemExit(f"seed {seed}: roll train failed:\n{tail[-2000:]}")
    status = json.loads((run / "status.json").read_text())
    wall = status.get("finished", 0) - status.get("started", 0) or time.perf_counter() - start
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    checkpoints = sorted(
        (run / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1])
    )
    return {"run_id": run_id, "wall_s": wall, "rows": rows, "model": str(checkpoints[-1])}


def _run_passing_stderr(cmd: list[str]) -> tuple[int, str]:
    """Run `cmd`, its stderr copied line by line to ours as it comes (a pipe: `roll train`
    prints plain progress lines, not a bar); returns its exit code and stderr's last lines."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stderr is not None
    tail: deque[str] = deque(maxlen=100)
    for line in proc.stderr:
        sys.stderr.write(line)
        sys.stderr.flush()
        tail.append(line)
    return proc.wait(), "".join(tail)


def _status(run: Path) -> str:
    return json.loads((run / "status.json").read_text()).get("status", "")


def _data_key(cfg, seed: int) -> str:  # noqa: ANN001
    """Held-out answers depend only on the data, the model and the seed."""
    text = f"{cfg.data.model_dump_json()}{cfg.model}{seed}"
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def answers(cfg, model_path: str, seed: int, cache: Path) -> list[bool]:  # noqa: ANN001
    """Greedy correctness on the seed's held-out problems, cached in `cache`."""
    from rollcli.cli.errors import err_console
    from rollcli.cli.progress import progress
    from rollcli.evaluation.rlvr_eval import evaluate_rlvr

    if cache.exists():
        return json.loads(cache.read_text())
    what = f"seed {seed}: {Path(model_path).name} answers {cfg.data.val_size} held-out problems"
    print(what, file=sys.stderr, flush=True)
    with progress(err_console) as report:
        result = evaluate_rlvr(
            cfg, cfg.name, model_path, model_path, n=cfg.data.val_size, seed=seed,
            num_threads=2, on_progress=report,
        )  # fmt: skip
    correct = [p.correct for p in result.problems]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(correct))
    return correct


def paired(first: list[bool], second: list[bool]) -> tuple[int, int, float]:
    """(only first right, only second right, exact McNemar p)."""
    from rollcli.evaluation.stats import mcnemar_exact

    b = sum(x and not y for x, y in zip(first, second, strict=True))
    c = sum(y and not x for x, y in zip(first, second, strict=True))
    return b, c, mcnemar_exact(b, c)


def judge(base_a, base_b, trained_a, trained_b, rows) -> dict[str, Any]:  # noqa: ANN001
    """The targets of issue #36 item 3 for one seed, with the numbers behind them."""
    acc = {k: sum(v) / len(v) for k, v in (("base_a", base_a), ("base_b", base_b),
                                           ("trained_a", trained_a), ("trained_b", trained_b))}  # fmt: skip
    up_a, down_a, p_a = paired(trained_a, base_a)
    up_b, down_b, p_b = paired(trained_b, base_b)
    up_c, down_c, p_c = paired(trained_a, base_b)
    vals = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    lengths = [r["response_length/mean"] for r in rows if "response_length/mean" in r]
    flags = []
    if lengths and lengths[-1] < 0.5 * lengths[0]:
        flags.append(f"length {lengths[0]:.0f}->{lengths[-1]:.0f}")
    if vals and vals[-1] < vals[0]:
        flags.append("val below step 0")
    kls = [r["actor/kl"] for r in rows if "actor/kl" in r]
    return {
        **acc,
        "a_gain": (up_a, down_a, p_a),
        "b_change": (up_b, down_b, p_b),
        "c_vs_prompt": (up_c, down_c, p_c),
        "val_curve": vals,
        "kl_last": kls[-1] if kls else None,
        "flags": flags,
        "meets_a": acc["trained_a"] >= 2 * acc["base_a"]
        and p_a < ALPHA
        and up_a > down_a
        and (not vals or vals[-1] >= vals[0]),
        "meets_b": not (p_b < ALPHA and down_b > up_b),
        "meets_c": p_c < ALPHA and up_c > down_c,
    }


def _ci(acc: float, n: int) -> str:
    from rollcli.evaluation.stats import wilson_interval

    low, high = wilson_interval(round(acc * n), n)
    return f"{acc:.3f} [{low:.3f}, {high:.3f}]"


def render(results: dict[int, dict[str, Any]], n: int) -> str:
    """A markdown table, one row per seed (docs/evaluation.md takes it as printed)."""
    head = (
        "| seed | base (a) | trained (a) | only trained / only base, p | base (b) | trained (b) "
        "| only trained / only base, p | trained (a) vs base (b), p | validation curve "
        "| collapse flags | run min | targets |"
    )
    lines = [f"held-out accuracy, n = {n} per seed, greedy; p: exact McNemar", "", head,
             "|" + " --- |" * 12]  # fmt: skip
    for seed, r in results.items():
        missed = [k[-1] for k in ("meets_a", "meets_b", "meets_c") if not r[k]]
        lines.append(
            f"| {seed} | {_ci(r['base_a'], n)} | {_ci(r['trained_a'], n)} | {_pair(r['a_gain'])} "
            f"| {_ci(r['base_b'], n)} | {_ci(r['trained_b'], n)} | {_pair(r['b_change'])} "
            f"| {_pair(r['c_vs_prompt'])} | {' → '.join(f'{v:.3f}' for v in r['val_curve'])} "
            f"| {', '.join(r['flags']) or '-'} | {r['wall_s'] / 60:.1f} "
            f"| {'met' if not missed else 'missed ' + ','.join(missed)} |"
        )
    return "\n".join(lines)


def _pair(t: tuple[int, int, float]) -> str:
    return f"{t[0]} / {t[1]}, {t[2]:.2g}"


def summary(results: dict[int, dict[str, Any]]) -> str:
    worst = min(results, key=lambda s: results[s]["trained_a"])
    mean_a = sum(r["trained_a"] for r in results.values()) / len(results)
    mean_base = sum(r["base_a"] for r in results.values()) / len(results)
    mean_b = sum(r["trained_b"] for r in results.values()) / len(results)
    mean_base_b = sum(r["base_b"] for r in results.values()) / len(results)
    met = sum(r["meets_a"] and r["meets_b"] and r["meets_c"] for r in results.values())
    return (
        f"mean (a) {mean_base:.3f} -> {mean_a:.3f}, (b) {mean_base_b:.3f} -> {mean_b:.3f}; "
        f"worst seed {worst} at {results[worst]['trained_a']:.3f}\n"
        f"seeds meeting all targets: {met}/{len(results)}"
    )


def main() -> None:
    from rollcli.config.loader import load_recipe
    from rollcli.models.loading import resolve_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recipe")
    ap.add_argument("--seeds", type=int, default=9, help="N: seeds 1..N-1 and the recipe's")
    ap.add_argument("--only", help="comma-separated seeds instead of --seeds, e.g. 2,5")
    ap.add_argument("--set", nargs="*", default=[], help="recipe overrides key.path=value")
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "learning")
    ap.add_argument("--boxed-suffix", default=BOXED)
    ap.add_argument("--json", type=Path, help="write the per-seed results here")
    args = ap.parse_args()

    cfg, _ = load_recipe(args.recipe, args.set)
    if cfg.pipeline != "rlvr":
        raise SystemExit(
            f"bench/learning.py measures rlvr recipes; {args.recipe} is {cfg.pipeline}"
        )
    boxed_cfg, _ = load_recipe(args.recipe, [*args.set, f"data.prompt_suffix={args.boxed_suffix}"])
    tag = hashlib.sha1(json.dumps([args.recipe, args.set]).encode()).hexdigest()[:8]
    base = str(resolve_model(cfg.model))
    results: dict[int, dict[str, Any]] = {}
    for seed in parse_seeds(args.seeds, args.only, cfg.seed):
        run = train(args.recipe, seed, args.set, args.runs_dir, tag)
        key_a, key_b = (_data_key(c, seed) for c in (cfg, boxed_cfg))
        cache = args.runs_dir / "base-cache"
        base_a = answers(cfg, base, seed, cache / f"{key_a}.json")
        base_b = answers(boxed_cfg, base, seed, cache / f"{key_b}.json")
        run_dir = args.runs_dir / run["run_id"]
        trained_a = answers(cfg, run["model"], seed, run_dir / f"learning-{key_a}.json")
        trained_b = answers(boxed_cfg, run["model"], seed, run_dir / f"learning-{key_b}.json")
        results[seed] = {
            **judge(base_a, base_b, trained_a, trained_b, run["rows"]),
            "wall_s": run["wall_s"],
            "run_id": run["run_id"],
        }
        r = results[seed]
        print(
            f"seed {seed}: (a) {r['base_a']:.3f} -> {r['trained_a']:.3f}  "
            f"(b) {r['base_b']:.3f} -> {r['trained_b']:.3f}  {r['wall_s'] / 60:.1f} min  "
            f"{run['run_id']}",
            file=sys.stderr,
            flush=True,
        )
    print(render(results, cfg.data.val_size))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(summary(results))


if __name__ == "__main__":
    main()

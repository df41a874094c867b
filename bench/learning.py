"""Learning regression: train an rlvr recipe over several seeds and judge what it learned.

    .venv/bin/python bench/learning.py rlvr-math --seeds 9        # seeds 1-8 and the recipe's
    .venv/bin/python bench/learning.py rlvr-math --only 2,3 --set train.lr=2e-5 \
        --against docs/learning/rlvr-math.json                    # a change: non-inferior?
    .venv/bin/python bench/learning.py --judge docs/learning/rlvr-math.json  # the defaults
    .venv/bin/python bench/learning.py --judge docs/learning/arms.json        # recorded arms

Each seed trains the recipe through the real CLI (`roll train RECIPE --seed S`, its stderr
passed through), then its final checkpoint and the base model answer the seed's held-out
problems (the run's own validation set, `data.val_size` of them, greedy), asked as the
recipe asks and with a `\\boxed{}` instruction as `data.prompt_suffix` instead
(`--boxed-suffix`). Every seed's per-problem outcomes (base, base asked for boxed, trained,
trained asked for boxed) go to an outcomes file after each seed; the table and the learning
bar's three verdicts (rollcli/evaluation/learning_bar.py: a per-seed floor, a t-test over
seeds against the base asked for boxed, and with `--against` the paired change's
non-inferiority) print under it, and the exit code is 1 where the bar is missed. Answers
are cached (the base model's per seed in the runs folder, a run's in its folder) and
finished runs are not trained again, so a second call only prints; `--judge` re-judges a
file without training.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
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


def seed_record(base_a, base_b, trained_a, trained_b, rows, wall_s: float) -> dict[str, Any]:  # noqa: ANN001
    """One seed's entry of the outcomes file: per-problem 0/1 lists (the same problems in the
    same order), the run's validation curve, its collapse flags and minutes."""
    vals = [r["val/accuracy"] for r in rows if "val/accuracy" in r]
    lengths = [r["response_length/mean"] for r in rows if "response_length/mean" in r]
    flags = []
    if lengths and lengths[-1] < 0.5 * lengths[0]:
        flags.append(f"length {lengths[0]:.0f}->{lengths[-1]:.0f}")
    as_ints = lambda xs: [int(bool(x)) for x in xs]  # noqa: E731
    return {
        "base": as_ints(base_a),
        "base_boxed": as_ints(base_b),
        "trained": as_ints(trained_a),
        "trained_boxed": as_ints(trained_b),
        "val_curve": vals,
        "flags": flags,
        "run_min": round(wall_s / 60, 1),
    }


def load_seeds(seeds: dict[str, Any]):  # noqa: ANN201
    """`{seed: entry}` of an outcomes or arms file as the bar's `SeedFigures`: an entry with
    per-problem lists is counted, one of recorded figures read as it is."""
    from rollcli.evaluation.learning_bar import SeedFigures, SeedOutcomes

    figures = {}
    for seed, e in seeds.items():
        if isinstance(e.get("base"), list):
            fig = SeedOutcomes(e["base"], e["base_boxed"], e["trained"], e.get("val_curve", []))
            figures[seed] = fig.figures()
        else:
            known = {k: e[k] for k in SeedFigures.__dataclass_fields__ if k in e}
            figures[seed] = SeedFigures(**{**known, "flags": tuple(e.get("flags", ()))})
    return figures


def _ci(acc: float, n: int) -> str:
    from rollcli.evaluation.stats import wilson_interval

    low, high = wilson_interval(round(acc * n), n)
    return f"{acc:.3f} [{low:.3f}, {high:.3f}]"


def render(seeds: dict[str, dict[str, Any]]) -> str:
    """A markdown table of an outcomes file, one row per seed, and under it the three
    verdicts of the learning bar (docs/evaluation.md takes both as printed)."""
    from rollcli.evaluation.learning_bar import floor

    figures = load_seeds(seeds)
    n = next(iter(figures.values())).n
    head = (
        "| seed | base | trained | only trained / only base, p | base asked for boxed "
        "| trained asked for boxed | trained - base boxed | validation curve | collapse flags "
        "| run min | floor |"
    )
    lines = [f"held-out accuracy, n = {n} per seed, greedy; p: exact McNemar", "", head,
             "|" + " --- |" * 11]  # fmt: skip
    for seed, e in seeds.items():
        fig, verdict = figures[seed], floor(figures[seed])
        boxed = e.get("trained_boxed")
        boxed_text = _ci(sum(boxed) / len(boxed), n) if isinstance(boxed, list) else "-"
        curve = " → ".join(f"{v:.3f}" for v in e.get("val_curve", [])) or "-"
        lines.append(
            f"| {seed} | {_ci(fig.base, n)} | {_ci(fig.trained, n)} "
            f"| {fig.wins} / {fig.losses}, {verdict.p:.2g} | {_ci(fig.base_boxed, n)} "
            f"| {boxed_text} | {fig.trained - fig.base_boxed:+.3f} | {curve} "
            f"| {', '.join(e.get('flags', [])) or '-'} | {e.get('run_min', '-')} "
            f"| {'met' if verdict.met else 'missed: ' + verdict.why} |"
        )
    return "\n".join(lines)


def verdicts(
    outcomes: dict[str, Any], against: dict[str, Any] | None, name: str | None
) -> tuple[str, bool]:
    """The three verdicts' lines for an outcomes file, and whether the bar is met."""
    from rollcli.evaluation.learning_bar import judge
    from rollcli.evaluation.learning_bar import render as render_verdict

    reference = load_seeds(against["seeds"]) if against else None
    verdict = judge(load_seeds(outcomes["seeds"]), reference)
    return render_verdict(verdict, name), verdict.met


def arm_seeds(arm: dict[str, Any], base_dir: Path) -> dict[str, Any]:
    """An arm's `{seed: entry}`: its recorded `seeds`, or the `outcomes` file it names
    (relative to the arms file)."""
    if "outcomes" in arm:
        return json.loads((base_dir / arm["outcomes"]).read_text())["seeds"]
    return arm["seeds"]


def judge_arms(arms_file: dict[str, Any], base_dir: Path) -> str:
    """Every arm of a file of recorded figures, judged: its floor, its test over seeds and,
    where it names an arm to compare with (`against`), the change's paired interval."""
    from rollcli.evaluation.learning_bar import judge

    arms = {name: arm_seeds(arm, base_dir) for name, arm in arms_file["arms"].items()}
    head = ("| arm | seeds | floor | trained - base boxed, mean [95%], p | against | "
            "paired change, mean [95%] | verdict |")  # fmt: skip
    lines = [head, "|" + " --- |" * 7]
    for name, seeds in arms.items():
        figures = load_seeds(seeds)
        ref_name = arms_file["arms"][name].get("against")
        reference = load_seeds(arms[ref_name]) if ref_name else None
        v = judge(figures, reference)
        missed = [s for s, f in v.floors.items() if not f.met]
        floor_text = f"{len(figures) - len(missed)}/{len(figures)}" + (
            f" (missed {', '.join(missed)})" if missed else ""
        )
        c = v.claim
        claim_text = f"{c.mean:+.3f} [{c.low:+.3f}, {c.high:+.3f}], {c.p:.2g}" if c else "-"
        d = v.change
        change_text = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]" if d else "-"
        verdict = "met" if v.met else "missed"
        if d is not None:
            verdict += ", non-inferior" if v.change_met else ", not non-inferior"
        lines.append(
            f"| {name} | {len(figures)} | {floor_text} | {claim_text} | {ref_name or '-'} "
            f"| {change_text} | {verdict} |"
        )
    return "\n".join(lines)


def judge_files(path: Path, against: Path | None) -> bool:
    """`--judge FILE [--against FILE]`: print the table and the verdicts again, no training."""
    data = json.loads(path.read_text())
    if "arms" in data:
        if against:
            raise SystemExit("--against applies to an outcomes file; each arm names its own")
        print(judge_arms(data, path.parent))
        return True
    return report(data, against)


def report(outcomes: dict[str, Any], against: Path | None) -> bool:
    """Print an outcomes file's table and the verdicts under it; whether the bar is met."""
    print(render(outcomes["seeds"]))
    ref = json.loads(against.read_text()) if against else None
    text, met = verdicts(outcomes, ref, str(against) if against else None)
    print(text)
    return met


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recipe", nargs="?")
    ap.add_argument("--seeds", type=int, default=9, help="N: seeds 1..N-1 and the recipe's")
    ap.add_argument("--only", help="comma-separated seeds instead of --seeds, e.g. 2,5")
    ap.add_argument("--set", nargs="*", default=[], help="recipe overrides key.path=value")
    ap.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "learning")
    ap.add_argument("--boxed-suffix", default=BOXED)
    ap.add_argument("--outcomes", type=Path, help="per-problem outcomes file to write "
                    "(default RUNS_DIR/outcomes-TAG.json)")  # fmt: skip
    ap.add_argument("--judge", type=Path, help="re-judge an outcomes (or arms) file, no training")
    ap.add_argument("--against", type=Path, help="a reference arm's outcomes file: the change")
    args = ap.parse_args()
    if args.judge:
        raise SystemExit(0 if judge_files(args.judge, args.against) else 1)
    if not args.recipe:
        ap.error("name a recipe to train, or --judge FILE")
    raise SystemExit(0 if train_and_judge(args) else 1)


def train_and_judge(args: argparse.Namespace) -> bool:
    from rollcli.config.loader import load_recipe
    from rollcli.models.loading import resolve_model

    cfg, _ = load_recipe(args.recipe, args.set)
    if cfg.pipeline != "rlvr":
        raise SystemExit(
            f"bench/learning.py measures rlvr recipes; {args.recipe} is {cfg.pipeline}"
        )
    boxed_cfg, _ = load_recipe(args.recipe, [*args.set, f"data.prompt_suffix={args.boxed_suffix}"])
    tag = hashlib.sha1(json.dumps([args.recipe, args.set]).encode()).hexdigest()[:8]
    base = str(resolve_model(cfg.model))
    out = args.outcomes or args.runs_dir / f"outcomes-{tag}.json"
    outcomes: dict[str, Any] = {
        "recipe": args.recipe, "set": args.set, "machine": _machine(), "seeds": {}
    }  # fmt: skip
    for seed in parse_seeds(args.seeds, args.only, cfg.seed):
        run = train(args.recipe, seed, args.set, args.runs_dir, tag)
        key_a, key_b = (_data_key(c, seed) for c in (cfg, boxed_cfg))
        cache = args.runs_dir / "base-cache"
        base_a = answers(cfg, base, seed, cache / f"{key_a}.json")
        base_b = answers(boxed_cfg, base, seed, cache / f"{key_b}.json")
        run_dir = args.runs_dir / run["run_id"]
        trained_a = answers(cfg, run["model"], seed, run_dir / f"learning-{key_a}.json")
        trained_b = answers(boxed_cfg, run["model"], seed, run_dir / f"learning-{key_b}.json")
        entry = seed_record(base_a, base_b, trained_a, trained_b, run["rows"], run["wall_s"])
        outcomes["seeds"][str(seed)] = entry
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(outcomes))  # after every seed: nothing lost to a stop
        acc = {k: sum(entry[k]) / len(entry[k]) for k in ("base", "base_boxed", "trained")}
        print(
            f"seed {seed}: base {acc['base']:.3f} (boxed {acc['base_boxed']:.3f}) -> trained "
            f"{acc['trained']:.3f}  {entry['run_min']} min  {run['run_id']}",
            file=sys.stderr,
            flush=True,
        )
    met = report(outcomes, args.against)
    print(f"outcomes: {out} (bench/learning.py --judge {out} prints this again)", file=sys.stderr)
    return met


def _machine() -> str:
    """The CPU's model name and its bf16 flags, for the outcomes file."""
    from rollcli.planning.cpu_bf16 import bf16_flags

    name = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    flags = "/".join(bf16_flags()) or "no native bf16"
    return f"{name}, {os.cpu_count()} cores, {flags}"


if __name__ == "__main__":
    main()

"""`roll reward NAME --input FILE.jsonl [--json] [--option k=v ...]`: check a reward before
training. Each row is a sample (`response` plus the fields the reward reads); its `answer` and
`tag` are read as training reads a data file's (`rollcli.data.prompts.reward_fields`: a JSON
number `42` is the text `"42"`), and it is scored by the same `RewardWorker` and runner that
training's reward workers use. NAME may be user code, `package.module:function` or
`path/to/file.py:function` (from the current folder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rollcli.cli.errors import fail, user_errors

out = Console(highlight=False)
# Options that are fields of the recipe's `reward` section, not keyword options.
SECTION_KEYS = ("format_weight", "format_when_cut", "routes", "route_options", "convention")


def parse_options(pairs: list[str]) -> dict[str, Any]:
    """`["max_workers=2", "routes={a: code}"]` → `{"max_workers": 2, "routes": {"a": "code"}}`
    (each value read as YAML, so numbers, booleans, lists and mappings work)."""
    import yaml

    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--option {pair!r} is not key=value", "e.g. --option max_workers=2")
        try:
            options[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            fail(f"--option {key}: cannot read {value!r} as a value", "quote text values")
    return options


def read_samples(path: Path, needs: tuple[str, ...], reward: str) -> list[dict[str, Any]]:
    """The samples of a data file (jsonl, json, parquet or csv, read as training reads a
    dataset); a bad line or a missing field names the file and the row."""
    from rollcli.data.dataset_rows import Source, read_rows
    from rollcli.data.prompts import DataError, reward_fields

    rows = read_rows(Source(str(path), key="--input"))
    samples = []
    for n, sample in enumerate(rows, 1):
        for field in ("response", *needs):
            choices = field.split("|")
            if not any(c in sample for c in choices):
                wanted = " or ".join(repr(c) for c in choices)
                raise DataError(
                    f"{path}: row {n}: missing field {wanted} (the {reward!r} reward reads it; "
                    f"this row has {', '.join(sorted(sample)) or 'no fields'})"
                )
        samples.append({**sample, **reward_fields(sample)})
    return samples


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean score, error count, and each numeric key's mean over the samples that have it
    (the same aggregation as a training step's `reward/<key>` metrics)."""
    keys = sorted({k for r in results for k in r if k not in ("score", "error")})
    metrics = {}
    for key in keys:
        values = [
            float(r[key])
            for r in results
            if isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)
        ]
        if values:
            metrics[key] = sum(values) / len(values)
    return {
        "samples": len(results),
        "mean": sum(r["score"] for r in results) / len(results),
        "errors": sum(1 for r in results if r.get("error")),
        "metrics": metrics,
    }


def _why(result: dict[str, Any]) -> str:
    reason = result.get("reason")
    if reason and reason != "ok":
        detail = str(result.get("detail") or "").strip().splitlines()
        return f"{reason}: {detail[-1][:80]}" if detail else str(reason)
    return ""


def _print(name: str, results: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    table = Table(title=f"reward {escape(name)}", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("why", overflow="fold", ratio=1)
    table.add_column("error", overflow="fold", ratio=1, style="red")
    for i, r in enumerate(results, 1):
        table.add_row(str(i), f"{r['score']:.3f}", escape(_why(r)), escape(r.get("error") or ""))
    out.print(table)
    out.print(
        f"{summary['samples']} samples, mean score {summary['mean']:.4f}, "
        f"{summary['errors']} with errors"
    )
    if summary["metrics"]:
        metrics = Table(box=box.SIMPLE_HEAD, show_edge=False)
        metrics.add_column("metric")
        metrics.add_column("mean", justify="right")
        for key, value in summary["metrics"].items():
            metrics.add_row(escape(f"reward/{key}"), f"{value:.4f}")
        out.print(metrics)


def reward(
    name: str = typer.Argument(
        ...,
        help="A built-in reward (math, code, ifeval, judge, judge_local, mix), "
        "package.module:function or path/to/file.py:function.",
    ),
    input_path: Path = typer.Option(
        ...,
        "--input",
        "-i",
        help="A data file (jsonl, json, parquet, csv) of samples: `response` + the reward's "
        "fields.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    option: list[str] = typer.Option(
        [], "--option", "-o", help="A reward option key=value (value read as YAML); repeatable."
    ),
    timeout_s: float = typer.Option(10.0, "--timeout", help="Per-sample time limit in seconds."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Score samples with a reward, through the same code path as training."""
    with user_errors(debug):
        from pydantic import ValidationError

        from rollcli.config.reward_section import RewardConfig
        from rollcli.rewards.registry import load_reward_fn, required_fields
        from rollcli.workers.reward import RewardArgs, RewardWorker

        if not timeout_s > 0:
            fail(f"--timeout {timeout_s:g}: give a positive number of seconds", "e.g. --timeout 10")
        from rollcli.config.user_code import resolve_ref

        name = resolve_ref(name, [Path.cwd()], "reward")  # ./my_reward.py:score
        options = parse_options(option)
        section = {k: options.pop(k) for k in SECTION_KEYS if k in options}
        try:
            cfg = RewardConfig(fn=name, timeout_s=timeout_s, options=options, **section)
        except ValidationError as exc:
            from rollcli.config.errors import format_validation_error

            raise format_validation_error(exc, RewardConfig, ("reward",), "--option") from None
        from rollcli.launch.plugin_check import check_reward

        check_reward(cfg)  # the reward resolves and declares the options given
        needs = required_fields(name, load_reward_fn(name))
        samples = read_samples(input_path, needs, name)
        worker = RewardWorker(
            RewardArgs(
                cfg.fn,
                options=cfg.worker_options,
                timeout_s=cfg.timeout_s,
                convention=cfg.convention,
            )
        )
        results = worker.score(samples)
        summary = summarise(results)
        if as_json:
            typer.echo(json.dumps({"reward": name, "results": results, "summary": summary}))
        else:
            _print(name, results, summary)
        if summary["errors"] == summary["samples"]:
            # nothing was scored: a script checking a reward must not read this as success
            fail(
                f"every sample raised an error in the {name!r} reward "
                f"(first: {results[0].get('error')})",
                "fix the reward or the fields it reads; each sample's error is listed above",
            )

"""`roll eval ENV|RECIPE --model NAME|PATH|RUN_ID|random [--n N] [--seed S] [--json]`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from rollcli.cli.errors import err_console, user_errors
from rollcli.cli.run_arg import RUNS_DIR

out = Console()


def eval_env(
    target: str = typer.Argument(
        ..., help="An environment (sokoban, frozenlake, webshop) or an agentic recipe / YAML file."
    ),
    model: str = typer.Option(
        "smollm2-135m",
        "--model",
        "-m",
        help="Registry name, HF folder, run id (its newest checkpoint) or 'random' (baseline).",
    ),
    n: int = typer.Option(32, "--n", help="Episodes (validation seeds seed, seed+1, ...)."),
    seed: int = typer.Option(None, "--seed", help="First episode seed (default agentic.val_seed)."),
    overrides: list[str] = typer.Argument(
        None, help="Recipe overrides as key.path=value, e.g. agentic.env_kwargs.size=3."
    ),
    runs_dir: Path = RUNS_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Play N episodes greedily and report success (95% Wilson interval), reward, steps."""
    from rollcli.cli.eval_target import resolve_eval_model, resolve_eval_target

    with user_errors(debug):
        if n < 1:
            from rollcli.config.errors import ConfigError

            raise ConfigError(f"--n {n}: play at least one episode")
        cfg, source = resolve_eval_target(target, overrides or [])
        model_path, tokenizer_path = resolve_eval_model(model, runs_dir, cfg.model)
        from rollcli.pipelines.agentic_eval import evaluate, render_episode

        err_console.print(
            f"evaluating {model} on {cfg.agentic.env} ({source}): {n} episodes", highlight=False
        )
        result = evaluate(
            cfg.agentic,
            model,
            model_path,
            n=n,
            seed=cfg.agentic.val_seed if seed is None else seed,
            max_new_tokens=cfg.rollout.max_new_tokens,
            num_threads=max(1, int(cfg.resources.num_cpus or 0) or _cores()),
            tokenizer_path=tokenizer_path,
        )
    summary = result.summary()
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    low, high = summary["success_ci95"]
    out.print(
        f"[bold]{summary['env']}[/] · model {summary['model']} · {summary['episodes']} episodes\n"
        f"  success rate        {summary['success_rate']:.3f}  (95% CI {low:.3f}-{high:.3f})\n"
        f"  mean reward         {summary['mean_reward']:.3f}\n"
        f"  valid-action rate   {summary['valid_action_rate']:.3f}\n"
        f"  effective actions   {summary['effective_action_rate']:.3f}\n"
        f"  mean steps          {summary['mean_steps']:.2f}"
        + (f"\n  env errors          {summary['env_errors']}" if summary["env_errors"] else ""),
        highlight=False,
    )
    example = next((ep for ep in result.episodes if ep.success), result.episodes[0])
    out.print("\n[bold]example episode[/]", highlight=False)
    out.print(render_episode(example), highlight=False, markup=False)


def _cores() -> int:
    import os

    return os.cpu_count() or 1

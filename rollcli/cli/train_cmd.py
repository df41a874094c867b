"""`roll train RECIPE|FILE [key.path=value ...]`."""

from __future__ import annotations

import typer
from rich.console import Console

from rollcli.cli.errors import err_console, user_errors

out = Console()


def train(
    recipe: str = typer.Argument(
        ..., help="Recipe name, unique prefix (rlvr → rlvr-math) or YAML file."
    ),
    overrides: list[str] = typer.Argument(
        None, help="Overrides as key.path=value, e.g. train.lr=1e-5."
    ),
    model: str = typer.Option(
        None, "--model", "-m", help="Registry name, HF folder or checkpoint folder."
    ),
    steps: int = typer.Option(None, "--steps", help="Training steps (train.steps)."),
    save_every: int = typer.Option(
        None, "--save-every", help="Checkpoint every N steps (0 = at the end)."
    ),
    eval_every: int = typer.Option(
        None, "--eval-every", help="Validate every N steps (0 = start and end)."
    ),
    runs_dir: str = typer.Option(
        None, "--runs-dir", help="Folder for run folders (default ./runs)."
    ),
    run_id: str = typer.Option(
        None, "--run-id", help="Run folder name (default RECIPE-DATE-TIME)."
    ),
    seed: int = typer.Option(None, "--seed", help="Random seed."),
    gpus: int = typer.Option(None, "--gpus", help="GPUs to use (0 = CPU)."),
    ray_address: str = typer.Option(
        None, "--ray-address", help="Join this Ray cluster instead of starting one."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the resolved recipe and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Train with a recipe: validate it, start Ray and the workers, run the loop."""
    from rollcli.config.loader import dump_recipe, load_recipe

    flags = {
        "model": model,
        "train.steps": steps,
        "run.save_every": save_every,
        "run.eval_every": eval_every,
        "run.runs_dir": runs_dir,
        "run.run_id": run_id,
        "seed": seed,
        "resources.gpus": gpus,
        "resources.ray_address": ray_address,
    }
    with user_errors(debug):
        cfg, source = load_recipe(recipe, overrides or [], flags)
        if cfg.resources.gpus > 0:
            raise _gpu_error(cfg.resources.gpus)
    if dry_run:
        typer.echo(f"# recipe {source}, resolved", err=True)
        typer.echo(dump_recipe(cfg), nl=False)
        return
    from rollcli.cli.display import RichDisplay, summary_table
    from rollcli.runs.launch import launch_training

    with user_errors(debug):
        try:
            result = launch_training(cfg, RichDisplay(err_console))
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
    out.print()
    out.print(
        summary_table(
            result.run_id,
            str(result.run_dir),
            result.final,
            result.first_val,
            result.wall_s,
            result.mean_step_s,
        )
    )


def _gpu_error(gpus: int) -> Exception:
    from rollcli.config.errors import ConfigError

    return ConfigError(
        f"--gpus {gpus}: GPU training strategies are not available in this build yet; "
        "run on CPU with --gpus 0"
    )

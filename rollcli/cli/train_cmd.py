"""`roll train RECIPE|FILE [key.path=value ...]` and `roll resume RUN_ID [key.path=value ...]`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from rollcli.cli.errors import err_console, print_note, print_warning, screen_width, user_errors
from rollcli.cli.run_arg import RUNS_DIR, find_run

out = Console()


def train(
    recipe: str = typer.Argument(
        ..., help="Recipe name, unique prefix (rlvr → rlvr-math) or YAML file."
    ),
    overrides: list[str] = typer.Argument(
        None, help="Overrides as key.path=value, e.g. train.lr=1e-5."
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Registry name, HF folder, checkpoint folder or run id (its newest checkpoint).",
    ),
    steps: int = typer.Option(None, "--steps", help="Training steps (train.steps)."),
    save_every: int = typer.Option(
        None, "--save-every", help="Checkpoint every N steps (0 = at the end)."
    ),
    keep_last: int = typer.Option(
        None, "--keep-last", help="Keep the newest K checkpoints (run.keep_last, default 2)."
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
    resume: str = typer.Option(
        "never",
        "--resume",
        help="auto: if a run with this --run-id exists, continue it from its newest checkpoint.",
    ),
    seed: int = typer.Option(None, "--seed", help="Random seed."),
    gpus: int = typer.Option(None, "--gpus", help="GPUs to use (0 = CPU)."),
    nodes: int = typer.Option(
        None, "--nodes", help="Nodes the GPUs are spread over (devices.nodes), as in roll plan."
    ),
    ray_address: str = typer.Option(
        None, "--ray-address", help="Join this Ray cluster instead of starting one."
    ),
    dry_run: bool = typer.Option(
        False,
        "--dry-run",
        help="Make every check `roll train` makes before it starts, print the resolved "
        "recipe and exit (checks of this machine become notes).",
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Train with a recipe: validate it, start Ray and the workers, run the loop."""
    from rollcli.config.applicable import applicable_yaml
    from rollcli.config.loader import load_recipe
    from rollcli.config.recipe_scale import scale_note

    flags = {
        "model": model,
        "train.steps": steps,
        "run.save_every": save_every,
        "run.keep_last": keep_last,
        "run.eval_every": eval_every,
        "run.runs_dir": runs_dir,
        "run.run_id": run_id,
        "seed": seed,
        "resources.gpus": gpus,
        "devices.nodes": nodes,
        "resources.ray_address": ray_address,
    }
    with user_errors(debug):
        if resume not in ("never", "auto"):
            from rollcli.config.errors import ConfigError

            raise ConfigError(f"--resume {resume!r}: use --resume auto (or leave it out)")
        cfg, source = load_recipe(recipe, overrides or [], flags)
        if resume == "auto" and not cfg.run.run_id:
            from rollcli.config.errors import ConfigError

            raise ConfigError(
                "--resume auto looks for a run by its id: give --run-id ID (or run.run_id)"
            )
    # which scale of the recipe runs: an alias picked one, or a recipe named in full runs
    # as written on GPUs where an at-scale form exists
    scaled = scale_note(recipe, overrides or [], flags)
    if dry_run:  # every check `roll train` makes before it starts; this machine's as notes
        from rollcli.launch.prelaunch import dry_run as prelaunch_checks

        with user_errors(debug):
            choice, notes, downloads = prelaunch_checks(cfg, print_warning)
        typer.echo(f"# recipe {source}, resolved", err=True)
        if scaled:
            print_note(scaled)
        from rollcli.cli.recipe_summary import summary_lines
        from rollcli.planning.from_recipe import auto_lines
        from rollcli.planning.render import render_lines

        lines = render_lines([*summary_lines(choice.cfg), *choice.lines, *auto_lines(choice.cfg)])
        err_console.print(lines, width=screen_width())
        # what the run reads (the run folder saves every key: dump_recipe)
        typer.echo(applicable_yaml(choice.cfg, screen_width()), nl=False)
        for note in notes:
            print_note(f"{note} (on the machine that trains, `roll train` checks this at launch)")
        for note in downloads:
            print_note(note)
        return
    if scaled:
        print_note(scaled)
    from rollcli.launch.launch import launch_training, resume_training, run_exists

    if resume == "auto" and cfg.run.run_id and run_exists(cfg.run.runs_dir, cfg.run.run_id):
        err_console.print(f"run {cfg.run.run_id} exists: --resume auto continues it", markup=False)
        repeat = [*(overrides or []), *(f"{k}={v}" for k, v in flags.items() if _resumable(k, v))]
        _run(debug, lambda d: resume_training(cfg.run.runs_dir, cfg.run.run_id, repeat, d))
        return
    _run(debug, lambda d: launch_training(cfg, d))


def resume(
    run_id: str = typer.Argument(..., help="The run to continue (a folder under --runs-dir)."),
    overrides: list[str] = typer.Argument(
        None, help="Overrides as key.path=value, e.g. train.steps=20 (recorded in the run)."
    ),
    runs_dir: Path = RUNS_DIR,
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Continue a run from its newest complete checkpoint, exactly as if it had not stopped."""
    from rollcli.launch.launch import resume_training

    folder = find_run(run_id, runs_dir)
    _run(debug, lambda d: resume_training(folder.parent, folder.name, overrides or [], d))


def _resumable(key: str, value: object) -> bool:
    """CLI flags that may be repeated as overrides on resume (where the run lives is not)."""
    return value is not None and key not in ("run.runs_dir", "run.run_id", "model", "seed")


def _run(debug: bool, start) -> None:  # noqa: ANN001
    from rollcli.cli.display import RichDisplay, summary_table
    from rollcli.launch.stop_signals import exit_code

    with user_errors(debug):
        try:
            result = start(RichDisplay(err_console))
        except KeyboardInterrupt as exc:  # a second signal, or one before the workers
            name = getattr(exc, "signal", "SIGINT")
            err_console.print(f"[yellow]interrupted ({name})[/]")
            raise typer.Exit(exit_code(name)) from None
    stopped = result.status == "stopped"
    out.print()
    out.print(
        summary_table(
            result.run_id,
            str(result.run_dir),
            result.final,
            result.first_val,
            result.wall_s,
            result.steps,
            f"stopped at step {result.final.get('step', '?')} of {result.total_steps}"
            if stopped
            else "finished",
        )
    )
    if stopped:
        runs_dir = result.run_dir.parent
        where = f" --runs-dir {runs_dir}" if runs_dir.name != "runs" else ""
        err_console.print(
            f"stopped ({result.stop_reason}); continue with: roll resume {result.run_id}{where}",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(
            exit_code(result.stop_reason if result.stop_reason != "collapse" else None)
        )

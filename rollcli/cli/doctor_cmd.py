"""`roll doctor [RECIPE] [key=value ...] [--model M] [--gpus N]`: what this machine can run, and
what a recipe lacks.

Quick and never crashing on a missing package: backends are found (not imported) and their
versions read from package metadata; GPUs come from `nvidia-smi -L`; the sandbox's
isolation layers from `rollcli.rewards.sandbox.detect_isolation()`; Ray processes left by a
killed run (raylet, gcs_server, dashboard / runtime-env agents whose driver is gone, so they
hang off init) are listed with the command that ends them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rollcli.cli.errors import user_errors
from rollcli.launch.gpu_support import nvidia_smi_gpus

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig

out = Console()

RAY_DAEMONS = ("raylet", "gcs_server", "dashboard_agent", "runtime_env_agent", "dashboard.py")
ROOT_PIDS = (0, 1)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    cmdline: str


def read_processes(proc: Path = Path("/proc")) -> list[Proc]:
    """Every process's pid, parent and command line (Linux /proc; empty elsewhere)."""
    procs = []
    for entry in proc.glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        procs.append(Proc(int(entry.name), ppid, cmd.strip()))
    return procs


def orphaned_ray(procs: list[Proc], *, subreapers: set[int] | None = None) -> list[Proc]:
    """Ray daemons whose driver is gone: a driver's `ray.init()` starts them as its children,
    so once it dies they are re-parented to init (or a subreaper). `ray start` clusters look
    the same; the listing says so.

    >>> orphaned_ray([Proc(7, 1, "/x/raylet --node"), Proc(8, 7, "python dashboard_agent.py")])
    [Proc(pid=7, ppid=1, cmdline='/x/raylet --node')]
    """
    roots = set(ROOT_PIDS) | (subreapers or set())
    alive = {p.pid for p in procs}
    return [
        p
        for p in procs
        if any(d in p.cmdline for d in RAY_DAEMONS) and (p.ppid in roots or p.ppid not in alive)
    ]


def doctor(
    recipe: str = typer.Argument(None, help="A recipe to check (name, prefix or YAML file)."),
    overrides: list[str] = typer.Argument(None, help="Overrides as key.path=value."),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="The model the run would train (registry name, HF folder or run id), as in "
        "roll train.",
    ),
    gpus: int = typer.Option(None, "--gpus", help="GPUs the run would use (default: recipe's)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    """Check backends, trackers, GPUs, sandbox and leftover Ray processes (and what RECIPE lacks).

    With a RECIPE: what its run needs that is missing here, with the install command."""
    from rollcli.planning.backends import BACKENDS, is_installed, version_of

    cfg = None
    if recipe:  # a bad recipe is one line before any probing, not after the tables
        from rollcli.config.loader import load_recipe

        with user_errors(debug):
            cfg, _ = load_recipe(recipe, overrides or [], {"model": model, "resources.gpus": gpus})
    elif model is not None:
        from rollcli.cli.errors import fail

        fail(
            "--model names the model of a recipe's run",
            "give the recipe: roll doctor RECIPE --model M",
        )
    table = Table(title="backends", title_justify="left")
    for col in ("backend", "version", "install (missing) or note"):
        table.add_column(col)
    for b in BACKENDS.values():
        found = is_installed(b)
        version = (version_of(b) or "?") if found else "[red]missing[/]"
        note = escape(b.note) if found else escape(b.install)
        table.add_row(escape(b.name), escape(version) if found else version, note)
    out.print(table)
    _trackers()

    gpu_lines = nvidia_smi_gpus()
    out.print(f"GPUs visible: {len(gpu_lines)}" + "".join(f"\n  {g}" for g in gpu_lines))
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        out.print(f"  CUDA_VISIBLE_DEVICES={cvd!r}")
    _sandbox()
    _orphans()
    if cfg is not None:
        with user_errors(debug):
            _recipe(cfg)


def _trackers(
    names: tuple[str, ...] | None = None,
    mode: str = "offline",
    project: str = "roll",
    title: str = "trackers (run.trackers)",
) -> None:
    """Each tracker (or those in `names`): installed (else the pip line) and where a run's
    metrics would go (run.tracker_mode=`mode` and this environment's WANDB_/SWANLAB_
    variables)."""
    from rollcli.config.trackers import TRACKERS, is_installed, where_it_logs

    table = Table(title=title, title_justify="left")
    for col in ("tracker", "installed", "logs to"):
        table.add_column(col)
    for name, info in TRACKERS.items():
        if names is not None and name not in names:
            continue
        found = is_installed(name)
        table.add_row(
            name,
            "yes" if found else f"[red]no[/]: {escape(info.install)}",
            escape(where_it_logs(name, mode, project)) if found else "-",
        )
    out.print(table)


def _sandbox() -> None:
    try:
        from rollcli.rewards.sandbox import detect_isolation

        layers = detect_isolation()
    except Exception as exc:  # the probe must never take doctor down
        out.print(
            f"sandbox isolation: [yellow]could not probe[/] ({type(exc).__name__}: {escape(str(exc))})"
        )
        return
    on = [k for k, v in layers.items() if v and k != "strong"]
    off = [k for k, v in layers.items() if not v and k != "strong"]
    verdict = "[green]strong[/]" if layers.get("strong") else "[yellow]weak[/]"
    out.print(f"sandbox isolation: {verdict}; on: {', '.join(on) or '-'}; off: {', '.join(off)}")


def _orphans() -> None:
    orphans = orphaned_ray(read_processes())
    if not orphans:
        out.print("Ray processes without a driver: none")
        return
    out.print(f"[yellow]Ray processes without a live driver: {len(orphans)}[/] (a killed run, or")
    out.print("a `ray start` cluster you keep on purpose):")
    for p in orphans:
        out.print(f"  {p.pid}  {escape(p.cmdline[:100])}")
    out.print("  end them with: " + "kill " + " ".join(str(p.pid) for p in orphans))


def _recipe(cfg: RecipeConfig) -> None:
    from rollcli.cli.errors import print_warning
    from rollcli.config.trackers import tracker_problems
    from rollcli.launch.prelaunch import check_prompt_lengths, check_recipe, with_run_model
    from rollcli.models.loading import download_note
    from rollcli.planning.backends import missing_backends

    cfg = with_run_model(cfg)
    downloads = [n for n in (download_note(cfg.model), *check_recipe(cfg, print_warning)) if n]
    downloads += check_prompt_lengths(cfg, bool(downloads))  # a refusal: one line, exit 2
    for note in downloads:
        out.print(f"note: {escape(note)}")

    _trackers(
        cfg.run.trackers,
        cfg.run.tracker_mode,
        cfg.run.tracker_project,
        title=f"recipe {cfg.name}: its trackers",
    )
    missing = missing_backends(cfg)
    missing += tracker_problems(cfg.run.trackers, cfg.run.tracker_mode)
    if not missing:
        out.print(f"recipe {escape(cfg.name)}: [green]everything it needs is here[/]")
        return
    out.print(f"recipe {escape(cfg.name)}: [red]{len(missing)} missing[/]")
    for line in missing:
        out.print(f"  - {escape(line)}")
    raise typer.Exit(1)

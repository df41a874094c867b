"""`roll runs rm RUN_ID...` and `roll runs gc`: give back the disk that runs take.

Neither touches a live run; `gc` lists what it would delete, with sizes, until `--yes`. The
rules are in rollcli/runs/retention.py. What is deleted goes to stdout, skipped runs and kept
checkpoints to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from rollcli.cli.errors import err_console, fail
from rollcli.cli.run_arg import RUNS_DIR, find_run

if TYPE_CHECKING:
    from rollcli.runs.retention import Doomed


def rm(
    run_ids: list[str] = typer.Argument(..., help="Run ids (see `roll runs ls`) or run folders."),
    force: bool = typer.Option(
        False, "--force", help="Remove a run even if another run started from its checkpoint."
    ),
    runs_dir: Path = RUNS_DIR,
) -> None:
    """Delete whole run folders (checkpoints, logs, samples).

    A live run (starting or running) is refused, and so, without --force,
    is a run whose checkpoint another run started from (`--model RUN_ID`:
    that run's resume reads it); then nothing is deleted."""
    from rollcli.runs.disk_space import gb
    from rollcli.runs.retention import live_reason, models_in_use, remove_run, users_elsewhere

    folders = list(dict.fromkeys(find_run(r, runs_dir) for r in run_ids))
    for folder in folders:
        reason = live_reason(folder)
        if reason is not None:
            fail(
                f"run {folder.name} is {reason}; nothing was removed",
                "stop it first (Ctrl-C in its terminal) or wait for it to end",
            )
    if not force:
        in_use: dict[Path, str] = {}
        for parent in {f.parent for f in folders}:
            in_use.update(models_in_use(parent))
        removed = {f.name for f in folders}
        for folder in folders:
            users = users_elsewhere(folder, in_use, removed)
            if users:
                fail(
                    f"{users[0]} (its resume and reference model read it); nothing was removed",
                    "remove that run too, or pass --force",
                )
    total = 0
    for folder in folders:
        size = remove_run(folder)
        total += size
        typer.echo(f"removed {folder} ({gb(size)})")
    if len(folders) > 1:
        typer.echo(f"{len(folders)} runs removed, {gb(total)} freed")


def gc(
    run_ids: list[str] = typer.Argument(
        None, help="Runs to clean (default: every run in --runs-dir)."
    ),
    keep_last: int | None = typer.Option(
        None, "--keep-last", min=0, help="Keep each run's newest K checkpoints."
    ),
    keep_best: bool = typer.Option(
        False, "--keep-best", help="Keep each run's best validation checkpoint (export --best)."
    ),
    older_than: str | None = typer.Option(
        None, "--older-than", help="Delete only checkpoints older than this: 7d, 12h, 30m."
    ),
    yes: bool = typer.Option(
        False, "--yes", help="Delete them (without it, a dry run: the list and the GB)."
    ),
    runs_dir: Path = RUNS_DIR,
) -> None:
    """Delete old checkpoints of runs that are not live.

    A dry run unless --yes: it lists each checkpoint it would delete, with
    its size and age, and the GB in all. Each run keeps its newest K
    (--keep-last), its best with --keep-best, those newer than --older-than
    and any checkpoint another run started from; half-written folders left
    by a kill always go. Live runs are skipped."""
    from rollcli.runs.disk_space import gb
    from rollcli.runs.retention import (
        delete,
        fmt_age,
        gc_run,
        live_reason,
        models_in_use,
        parse_age,
        run_folders,
    )

    if keep_last is None and older_than is None:
        fail("roll runs gc needs --keep-last K, --older-than AGE or both", "e.g. --keep-last 1")
    try:
        age_s = None if older_than is None else parse_age(older_than)
    except ValueError as err:
        fail(str(err))
    if run_ids:
        folders = list(dict.fromkeys(find_run(r, runs_dir) for r in run_ids))
    elif runs_dir.is_dir():
        folders = run_folders(runs_dir)
    else:
        fail(f"runs folder {runs_dir} does not exist", "pass --runs-dir FOLDER that holds the runs")
    in_use: dict[Path, str] = {}
    for parent in {f.parent for f in folders}:
        in_use.update(models_in_use(parent))
    plan: list[tuple[Path, list[Doomed]]] = []
    for folder in folders:
        reason = live_reason(folder)
        if reason is not None:
            err_console.print(f"skipped {folder.name}: {reason}", markup=False)
            continue
        doomed, notes = gc_run(folder, keep_last, keep_best, age_s, in_use)
        for note in notes:
            err_console.print(note, markup=False)
        if doomed:
            plan.append((folder, doomed))
    if not plan:
        typer.echo("nothing to delete")
        return
    for folder, doomed in plan:
        typer.echo(folder.name)
        for item in doomed:
            what = "best" if item.best else "half-written" if item.step is None else ""
            line = f"  {item.path.name:<16} {gb(item.size):>10}  {fmt_age(item.age_s):>4} old"
            typer.echo(f"{line}  {what}".rstrip())
    size = sum(i.size for _, d in plan for i in d)
    if not yes:
        typer.echo(f"would free {gb(size)} ({_count(plan)}); --yes deletes them")
        return
    done: list[tuple[Path, list[Doomed]]] = []
    for folder, doomed in plan:
        reason = live_reason(folder)  # it may have been resumed since the list was made
        if reason is not None:
            err_console.print(f"skipped {folder.name}: {reason}", markup=False)
            continue
        delete(doomed)
        done.append((folder, doomed))
    freed = sum(i.size for _, d in done for i in d)
    typer.echo(f"freed {gb(freed)} ({_count(done)})")


def _count(plan: list[tuple[Path, list[Doomed]]]) -> str:
    """`3 checkpoints of 2 runs`."""
    count = sum(len(doomed) for _, doomed in plan)
    runs = len(plan)
    return f"{count} checkpoint{'s' * (count != 1)} of {runs} run{'s' * (runs != 1)}"

"""The RUN_ID argument of `roll logs / export / plot`: a run id under `--runs-dir`, or the path
of a run folder; an unknown one is a one-line error that names the close matches."""

from __future__ import annotations

import difflib
from pathlib import Path

import typer

from rollcli.cli.errors import fail

RUNS_DIR = typer.Option(Path("runs"), "--runs-dir", help="Folder that holds the runs.")


def _is_run(folder: Path) -> bool:
    return (folder / "recipe.yaml").is_file()


def find_run(run_id: str, runs_dir: Path) -> Path:
    """The run folder of `run_id` (or `run_id` itself when it is a run folder's path)."""
    folder = runs_dir / run_id
    if _is_run(folder):
        return folder
    as_path = Path(run_id)
    if as_path.is_dir() and _is_run(as_path):
        return as_path
    if not runs_dir.is_dir():
        what = "is a file, not a folder" if runs_dir.exists() else "does not exist"
        fail(f"no run {run_id!r}: runs folder {runs_dir} {what}", "pass --runs-dir FOLDER")
    known = sorted(p.name for p in runs_dir.iterdir() if _is_run(p))
    close = difflib.get_close_matches(run_id, known, n=3, cutoff=0.6)
    if close:
        hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
    elif known:
        hint = "`roll runs ls` lists the runs"
    else:
        hint = "no runs there; pass --runs-dir to read another folder"
    fail(f"no run {run_id!r} in {runs_dir}", hint)

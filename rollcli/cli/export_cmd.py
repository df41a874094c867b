"""`roll export RUN_ID OUT_DIR [--step N]`: the policy as a Hugging Face folder."""

from __future__ import annotations

from pathlib import Path

import typer

from rollcli.cli.errors import err_console, fail
from rollcli.cli.run_arg import RUNS_DIR, find_run


def _size(num_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if num_bytes < 1024 or unit == "GB":
            return f"{num_bytes:.0f} {unit}" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    raise AssertionError


def export(
    run_id: str = typer.Argument(..., help="Run id (see `roll runs ls`) or a run folder."),
    out_dir: Path = typer.Argument(..., help="Folder to write the Hugging Face model into."),
    step: int | None = typer.Option(
        None, "--step", help="Checkpoint step to export (default: the newest complete one)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace OUT_DIR if it is not empty."),
    runs_dir: Path = RUNS_DIR,
) -> None:
    """Export a checkpoint's policy as a Hugging Face folder.

    Copies model, config, generation config and tokenizer (not roll's optimizer and trainer
    state) from the newest complete checkpoint, or --step N, into OUT_DIR, which
    `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` then load."""
    from rollcli.runs.export import ExportError, export_policy, pick_checkpoint

    folder = find_run(run_id, runs_dir)
    try:
        number, checkpoint = pick_checkpoint(folder / "checkpoints", step)
        written = export_policy(checkpoint, out_dir, force=force)
    except ExportError as exc:
        fail(str(exc), exc.hint)
    err_console.print(f"exported step {number} of run {folder.name} to {out_dir}:")
    total = 0
    for path in written:
        size = path.stat().st_size
        total += size
        typer.echo(f"{path}\t{_size(size)}")
    err_console.print(
        f"[dim]{len(written)} files, {_size(total)}; load with "
        f"AutoModelForCausalLM.from_pretrained({str(out_dir)!r})[/]",
        soft_wrap=True,
    )

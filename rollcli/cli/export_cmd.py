"""`roll export RUN_ID OUT_DIR [--step N] [--adapter]`: the policy as a Hugging Face folder
(a LoRA run's merged), or a LoRA run's adapter as a peft folder."""

from __future__ import annotations

from pathlib import Path

import typer

from rollcli.cli.errors import err_console, fail, screen_width
from rollcli.cli.run_arg import RUNS_DIR, find_run
from rollcli.config.errors import wrap


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
    best: bool = typer.Option(
        False, "--best", help="Export the checkpoint with the best validation score."
    ),
    force: bool = typer.Option(False, "--force", help="Replace OUT_DIR if it is not empty."),
    adapter: bool = typer.Option(
        False, "--adapter", help="A LoRA run: write the adapter (peft folder), not merged weights."
    ),
    runs_dir: Path = RUNS_DIR,
) -> None:
    """Export a checkpoint's policy as a Hugging Face folder.

    Copies model, config, generation config and tokenizer (not roll's optimizer and trainer
    state) from the newest complete checkpoint, --step N, or --best (the best validation
    score, kept whatever run.keep_last says), into OUT_DIR, which
    `AutoModelForCausalLM.from_pretrained` and `AutoTokenizer.from_pretrained` then load.
    A LoRA run's model holds the merged weights; --adapter writes its adapter instead
    (`peft.PeftModel.from_pretrained(base, OUT_DIR)`)."""
    from rollcli.runs.export import ExportError, export_policy, pick_checkpoint

    folder = find_run(run_id, runs_dir)
    if best and step is not None:
        fail("--best and --step both pick a checkpoint", "give one of them")
    try:
        number, checkpoint = pick_checkpoint(folder / "checkpoints", step, best=best)
        written = export_policy(checkpoint, out_dir, force=force, adapter=adapter)
    except ExportError as exc:
        fail(str(exc), exc.hint)
    # the folder once, then each file by its name: a long OUT_DIR repeated on every line
    # ran the list to 154 columns
    say(f"exported step {number} of run {folder.name} to {out_dir}:")
    total = 0
    for path in written:
        size = path.stat().st_size
        total += size
        typer.echo(f"{path.relative_to(out_dir)}\t{_size(size)}")
    call = "PeftModel." if adapter else "AutoModelForCausalLM."
    args = f"base_model, {str(out_dir)!r}" if adapter else repr(str(out_dir))
    load = f"{call}from_pretrained({args})"
    if len(load) + 2 > screen_width():  # a line of its own would not hold it: break after (
        load = load.replace("(", "( ", 1)
    say(f"{len(written)} files, {_size(total)}; load with {load}", style="dim")


def say(text: str, style: str = "") -> None:
    """A line on stderr, wrapped by words to 80 columns (a path is never split)."""
    body = wrap(text, "", screen_width())
    err_console.print(body, style=style, markup=False, highlight=False, soft_wrap=True)

"""`roll plot RUN_ID [-o FILE.png]`: the run's curves in one PNG."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from rollcli.cli.errors import err_console, fail
from rollcli.cli.run_arg import RUNS_DIR, find_run


def plot(
    run_id: str = typer.Argument(..., help="Run id (see `roll runs ls`) or a run folder."),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="PNG to write (default: runs/<id>/plot.png)."
    ),
    runs_dir: Path = RUNS_DIR,
) -> None:
    """Plot a run's curves into one PNG.

    Panels: train reward, validation accuracy, KL, entropy, response length, step time and
    each phase's share of the matmul peak (MFU) against the step; a metric the run did not log leaves its panel saying so."""
    from rollcli.runs.plot import plot_run
    from rollcli.runs.run_dir import RunDir

    folder = find_run(run_id, runs_dir)
    run = RunDir(folder)
    rows = run.read_metrics()
    if not rows:
        fail(f"run {folder.name} has no metrics yet", f"{folder / 'metrics.jsonl'} is empty")
    if output is not None and output.suffix.lower() != ".png":
        fail(f"{output} is not a .png file", "pass -o FILE.png")
    st = run.read_status()
    last_step = max(int(r.get("step", 0)) for r in rows)
    total = st.get("total_steps") or "?"
    subtitle = " · ".join(
        str(part)
        for part in (
            st.get("recipe"),
            st.get("model"),
            run.effective_status(),
            f"step {last_step}/{total}",
        )
        if part
    )
    out = plot_run(
        rows, output or folder / "plot.png", title=f"run {folder.name}", subtitle=subtitle
    )
    typer.echo(str(out))
    err_console.print(f"[dim]wrote {len(rows)} steps of run {escape(folder.name)}[/]")

"""`roll logs RUN_ID [-f]`: events and one line per step, merged in time order."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from rollcli.cli.errors import err_console
from rollcli.cli.run_arg import RUNS_DIR, find_run

if TYPE_CHECKING:
    from rollcli.runs.log_tail import LogLine


def _echo(line: LogLine) -> None:
    text = typer.style(line.text, bold=True) if line.kind == "step" else line.text
    typer.echo(f"{typer.style(line.stamp, dim=True)}  {text}")  # styles dropped when piped


def logs(
    run_id: str = typer.Argument(..., help="Run id (see `roll runs ls`) or a run folder."),
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing new lines until the run stops (or Ctrl-C)."
    ),
    lines: int = typer.Option(20, "-n", "--lines", min=0, help="How many past lines to show."),
    runs_dir: Path = RUNS_DIR,
    poll_s: float = typer.Option(1.0, "--poll", hidden=True, help="Seconds between reads."),
) -> None:
    """Tail a run: its events and one line per step, in time order.

    A step line shows step k/N, reward, validation accuracy (when the step validated), KL,
    entropy, response length, each phase's share of the matmul peak (mfu) and step time
    (agentic runs: the share of informative groups, the first action token's entropy and
    the most frequent action; tool envs also tool calls per episode, the share of calls that
    ran, and tool errors with the most common kind). With -f it follows the run until it
    stops."""
    from rollcli.runs.log_tail import RunTail
    from rollcli.runs.log_tail import follow as follow_run
    from rollcli.runs.run_dir import RunDir

    run = RunDir(find_run(run_id, runs_dir))
    tail = RunTail(run)
    past = tail.poll()
    for line in past[-lines:] if lines else []:
        _echo(line)
    if not follow:
        return
    try:
        status = follow_run(tail, _echo, poll_s=poll_s)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    note = " (its process is gone)" if status == "killed" else ""
    err_console.print(f"[dim]run {escape(run.root.name)} is {status}{note}[/]")

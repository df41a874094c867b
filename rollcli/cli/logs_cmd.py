"""`roll logs RUN_ID [-f] [--wide]`: events and one line per step, merged in time order.

By default every line fits 80 columns (or the terminal, where narrower): a step line keeps
the parts that fit (`format_step`'s ranks), an event is wrapped under its text. `--wide`
prints each event and step whole on one line, every part of the step (for grep and scripts).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape

from rollcli.cli.errors import WIDTH, err_console
from rollcli.cli.run_arg import RUNS_DIR, find_run
from rollcli.config.errors import wrap

if TYPE_CHECKING:
    from rollcli.runs.log_tail import LogLine

STAMP = " " * len("HH:MM:SS  ")  # what a line's text starts after


def _printer(width: int) -> Callable[[LogLine], None]:
    """Echo a line (styles dropped when piped); an event wrapped to `width` columns under
    its text (0: whole)."""

    def echo(line: LogLine) -> None:
        if line.kind == "step":
            text = typer.style(line.text, bold=True)
        elif width:
            text = wrap(line.text, STAMP, width, indent=STAMP)
        else:
            text = line.text
        typer.echo(f"{typer.style(line.stamp, dim=True)}  {text}")

    return echo


def logs(
    run_id: str = typer.Argument(..., help="Run id (see `roll runs ls`) or a run folder."),
    follow: bool = typer.Option(
        False, "-f", "--follow", help="Keep printing new lines until the run stops (or Ctrl-C)."
    ),
    lines: int = typer.Option(20, "-n", "--lines", min=0, help="How many past lines to show."),
    runs_dir: Path = RUNS_DIR,
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every event and step whole on one line, each step with all its metrics "
        "(default: lines that fit 80 columns).",
    ),
    poll_s: float = typer.Option(1.0, "--poll", hidden=True, help="Seconds between reads."),
) -> None:
    """Tail a run: its events and one line per step, in time order.

    A step line shows step k/N, reward, validation accuracy (when the step validated), KL,
    entropy, response length, each phase's share of the matmul peak (mfu) and step time
    (agentic runs: the share of informative groups, the first action token's entropy and
    the most frequent action; tool envs also tool calls per episode, the share of calls that
    ran, and tool errors with the most common kind); lines fit 80 columns, a step keeping
    the parts that fit, unless --wide. With -f it follows the run until it stops."""
    from rollcli.runs.log_tail import RunTail
    from rollcli.runs.log_tail import follow as follow_run
    from rollcli.runs.run_dir import RunDir

    run = RunDir(find_run(run_id, runs_dir))
    width = 0 if wide else min(WIDTH, Console().width)
    tail = RunTail(run, step_width=max(width - len(STAMP), 0))
    echo = _printer(width)
    past = tail.poll()
    for line in past[-lines:] if lines else []:
        echo(line)
    if not follow:
        return
    try:
        status = follow_run(tail, echo, poll_s=poll_s)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    note = " (its process is gone)" if status == "killed" else ""
    err_console.print(f"[dim]run {escape(run.root.name)} is {status}{note}[/]")

"""The `roll` command line. Thin: it parses, resolves and prints; pipelines do the work.

`roll --help`, `roll recipes` and `roll runs` import neither torch nor Ray.
"""

from __future__ import annotations

import typer

from rollcli import __version__
from rollcli.cli import data_cmd, recipes_cmd, runs_cmd
from rollcli.cli.doctor_cmd import doctor
from rollcli.cli.errors import RollGroup, set_global_debug
from rollcli.cli.eval_cmd import eval_cmd
from rollcli.cli.export_cmd import export
from rollcli.cli.help_format import format_help
from rollcli.cli.logs_cmd import logs
from rollcli.cli.plan_cmd import plan
from rollcli.cli.plot_cmd import plot
from rollcli.cli.reward_cmd import reward
from rollcli.cli.train_cmd import resume, train

format_help()  # paragraphs wrapped by words; `--dry-run`, not `--dry-run <bool>`
app = typer.Typer(
    name="roll",
    cls=RollGroup,
    help="RL post-training of LLMs (RLVR, agentic RL, DPO, distillation, SFT) on Ray, from a laptop CPU to a GPU cluster.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(recipes_cmd.app, name="recipes")
app.add_typer(runs_cmd.app, name="runs")
app.add_typer(data_cmd.app, name="data")
app.command("train")(train)
app.command("plan")(plan)
app.command("doctor")(doctor)
app.command("resume")(resume)
app.command("logs")(logs)
app.command("export")(export)
app.command("plot")(plot)
app.command("eval")(eval_cmd)
app.command("reward")(reward)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"roll {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        help="Show the traceback of an error (roll --debug COMMAND ...; or ROLL_DEBUG=1).",
    ),
) -> None:
    """roll: RL post-training of LLMs."""
    set_global_debug(debug)


def main() -> None:
    app()

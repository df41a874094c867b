"""`roll recipes ls | show NAME | cp NAME FILE`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from rollcli.cli.errors import fail, user_errors
from rollcli.cli.out_file import write_text

app = typer.Typer(help="The recipe catalogue: list, show and copy recipes.", no_args_is_help=True)
out = Console()


@app.command("ls")
def list_recipes() -> None:
    """List the recipes in the catalogue."""
    from rollcli.config.catalogue import catalogue

    table = Table(
        title="roll recipes",
        caption="also: other names for the recipe (`roll train rlvr` is rlvr-math)",
    )
    table.add_column("name", no_wrap=True)
    for col in ("pipeline", "model", "what it does"):
        table.add_column(col, overflow="fold")
    for e in catalogue():
        name = Text(e.name)
        if e.aliases:  # under the name: a column of its own left the description no room
            name.append(f"\nalso: {', '.join(e.aliases)}", style="dim")
        table.add_row(name, *(escape(str(v)) for v in (e.pipeline, e.model, e.description)))
    out.print(table)


@app.command("show")
def show(name: str = typer.Argument(..., help="Recipe name or unique prefix.")) -> None:
    """Print a recipe's YAML."""
    from rollcli.config.catalogue import find_recipe

    with user_errors():
        _, text = find_recipe(name)
    if out.is_terminal:
        out.print(Syntax(text, "yaml"))
    else:
        typer.echo(text, nl=False)


@app.command("cp")
def copy(
    name: str = typer.Argument(..., help="Recipe name or unique prefix."),
    dest: Path = typer.Argument(..., help="File to write (edit it, then `roll train FILE`)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Copy a recipe to a file you can edit."""
    from rollcli.config.catalogue import find_recipe

    with user_errors():
        _, text = find_recipe(name)
    if dest.is_dir():
        dest = dest / f"{name}.yaml"
    if dest.exists() and not force:
        fail(f"{dest} already exists", "pass --force to overwrite")
    write_text(dest, text)
    typer.echo(f"wrote {dest}")

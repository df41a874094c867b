"""Every command's `--help` at 80 columns: flags carry no `<bool>` type label."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()


def _command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    if isinstance(getattr(group, "commands", None), dict):
        for name, sub in group.commands.items():
            paths += _command_paths(sub, (*prefix, name))
    return paths


def test_no_help_page_labels_a_flag_bool() -> None:
    paths = _command_paths(typer.main.get_command(app))
    assert len(paths) > 15  # every command and sub-command
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert "<bool>" not in result.output, (path, result.output)
        assert "--help" in result.output
    train = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "80"}).output
    assert "<int>" in train  # options that take a value keep their type


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """`roll ... | head`: when the reader closes the pipe, roll stops without an error line
    (before: "error: BrokenPipeError ... an unexpected error") and exits 1."""
    import subprocess
    import sys

    code = "from rollcli.cli.app import main; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "eval", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    for _ in range(40):  # `| head -40`: the page is longer, so a later write fails (EPIPE)
        proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 1
    assert err == ""

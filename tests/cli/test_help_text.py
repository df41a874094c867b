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

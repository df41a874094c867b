"""Every command's `--help` at 80 columns: flags carry no `<bool>` type label."""

from __future__ import annotations

from typing import Any

import pytest
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


def test_a_reader_that_goes_away_ends_the_command_quietly(monkeypatch, capsys) -> None:
    """`roll ... | head`: when the reader closes the pipe, a command stops with exit 1 and no
    error line (before: "error: BrokenPipeError ... an unexpected error"), its stdout sent
    to /dev/null so the interpreter's last flush cannot fail. (Through a real pipe this
    depends on when the reader closes, so the handler is driven here; the redirect is
    recorded, not made, to leave pytest's own stdout alone.)"""
    import os

    from rollcli.cli.errors import user_errors

    redirected: list[int] = []
    monkeypatch.setattr(os, "dup2", lambda src, dst: redirected.append(dst))
    with pytest.raises(typer.Exit) as exit_info, user_errors():
        raise BrokenPipeError(32, "Broken pipe")
    assert exit_info.value.exit_code == 1
    assert capsys.readouterr().err == ""
    assert redirected == [1]

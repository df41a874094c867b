"""User errors: one red line on stderr with a hint, a non-zero exit, tracebacks only with --debug."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console

err_console = Console(stderr=True, highlight=False)

USER_ERROR_EXIT = 2


def _user_error_types() -> tuple[type[BaseException], ...]:
    from rollcli.config.errors import ConfigError

    types: list[type[BaseException]] = [ConfigError, FileExistsError]
    for module, name in (
        ("rollcli.data.prompts", "DataError"),
        ("rollcli.models.loading", "ModelNotFoundError"),
        ("rollcli.rewards.registry", "RewardNotFoundError"),
        ("rollcli.runs.launch", "RunNotFoundError"),
        ("rollcli.runs.faults", "FaultSpecError"),
        ("rollcli.pipelines.rl.reward_health", "RewardFailedError"),
    ):
        mod = sys.modules.get(module)
        if mod is not None:
            types.append(getattr(mod, name))
    return tuple(types)


def debug_enabled(flag: bool = False) -> bool:
    return flag or os.environ.get("ROLL_DEBUG", "") not in ("", "0")


@contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    try:
        yield
    except typer.Exit:
        raise
    except Exception as exc:
        if debug_enabled(debug) or not isinstance(exc, _user_error_types()):
            if not debug_enabled(debug):
                err_console.print(f"[red]error:[/] {type(exc).__name__}: {exc}")
                err_console.print(
                    "[dim]run again with --debug (or ROLL_DEBUG=1) for the traceback[/]"
                )
                raise typer.Exit(1) from None
            raise
        message = str(exc.args[0]) if exc.args else str(exc)
        err_console.print(f"[red]error:[/] {message}", soft_wrap=True)
        raise typer.Exit(USER_ERROR_EXIT) from None


def fail(message: str, hint: str = "") -> NoReturn:
    err_console.print(
        f"[red]error:[/] {message}" + (f" [dim]({hint})[/]" if hint else ""), soft_wrap=True
    )
    raise typer.Exit(USER_ERROR_EXIT)

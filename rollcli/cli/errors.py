"""User errors: one red message on stderr with a hint, a non-zero exit, tracebacks only with
--debug.

A message is one line of text, printed wrapped to 80 columns (or the terminal, where
narrower) with its continuation lines indented two spaces: a path or key is never split,
and a test reads it back whole with `" ".join(stderr.split())`. Message text is never read
as console markup: an error that ends `e.g.
train.lora.target_modules=[q_proj,v_proj]` prints its example (rich would take
`[q_proj,v_proj]` for a style tag and drop it). Every command runs inside `RollGroup`, so an
exception no command expected is one line too (exit 1), a usage error is one line (exit 2),
and the traceback shows only under `roll --debug ...` or ROLL_DEBUG=1.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text
from typer.core import TyperGroup

err_console = Console(stderr=True, highlight=False)

USER_ERROR_EXIT = 2
UNEXPECTED_EXIT = 1
WIDTH = 80  # the widest line an error prints (narrower on a narrower terminal)
INTERRUPTED_EXIT = 130
DEBUG_HINT = "`roll --debug ...` or ROLL_DEBUG=1 shows the traceback"

# set by the global `roll --debug` option for the command that follows it
_global_debug = False


def set_global_debug(flag: bool) -> None:
    global _global_debug
    _global_debug = flag


def _user_error_types() -> tuple[type[BaseException], ...]:
    from rollcli.config.errors import ConfigError

    types: list[type[BaseException]] = [ConfigError, FileExistsError]
    for module, name in (
        ("rollcli.data.prompts", "DataError"),
        ("rollcli.models.loading", "ModelNotFoundError"),
        ("rollcli.rewards.registry", "RewardNotFoundError"),
        ("rollcli.launch.launch", "RunNotFoundError"),
        ("rollcli.runs.faults", "FaultSpecError"),
        ("rollcli.runs.checkpoint", "DiskFullError"),
        ("rollcli.rewards.failures", "RewardFailedError"),
        ("rollcli.pipelines.rl.sync_verify", "WeightSyncError"),
    ):
        # a module still being imported (launch's background imports) may lack the class
        # yet: no error of that type can have been raised, and the real error must print
        error_type = getattr(sys.modules.get(module), name, None)
        if error_type is not None:
            types.append(error_type)
    return tuple(types)


def debug_enabled(flag: bool = False) -> bool:
    return flag or _global_debug or os.environ.get("ROLL_DEBUG", "") not in ("", "0")


def error_line(message: str, hint: str = "", width: int = WIDTH) -> Text:
    """`error: MESSAGE (HINT)` as rich Text, wrapped to `width` columns (continued lines
    indented two spaces): styled, with the message taken literally.

    >>> print(error_line("data.path: 'a/b.jsonl' does not exist", "check the path", 40))
    error: data.path: 'a/b.jsonl' does not
      exist (check the path)
    """
    from rollcli.config.errors import wrap

    message = re.sub(r"\s*\n\s*", " ", message.strip())  # a message wrapped where it was raised
    full = f"{message} ({hint})" if hint else message
    text = Text("error: " + wrap(full, "error: ", width))
    text.stylize("red", 0, len("error:"))
    if hint:  # the hint's `(`: the same count of non-blank characters in, wrapped or not
        at = _nth_visible(text.plain, len("error:") + len("".join(message.split())))
        text.stylize("dim", at)
    return text


def _nth_visible(text: str, n: int) -> int:
    """The index in `text` of its character after the first `n` non-blank ones."""
    seen = 0
    for i, char in enumerate(text):
        if not char.isspace():
            if seen == n:
                return i
            seen += 1
    return len(text)


def print_error(message: str, hint: str = "") -> None:
    err_console.print(error_line(message, hint, screen_width()), soft_wrap=True)


def print_note(message: str) -> None:
    """`note: MESSAGE` on stderr, wrapped as an error is."""
    from rollcli.config.errors import wrap

    text = wrap(message, "note: ", screen_width())
    err_console.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)


def print_warning(message: str) -> None:
    """`warning: MESSAGE` on stderr (a message that opens with `warning: ` keeps it once),
    wrapped as an error is."""
    from rollcli.config.errors import wrap

    body = message.removeprefix("warning: ")
    text = wrap(body, "warning: ", screen_width())
    err_console.print(f"warning: {text}", markup=False, highlight=False, soft_wrap=True)


def screen_width() -> int:
    """The columns a diagnostic line may take: 80, or the terminal's where narrower."""
    return min(WIDTH, err_console.width)


def _first_line(exc: BaseException) -> str:
    """`TypeName: first line of the message`; a Ray task error names its cause (its own first
    line is only `ray::Worker.method() (pid=..., ip=...)`)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    lines = [line for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__
    return text + (" ..." if len(lines) > 1 else "")


@contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    """A user error (bad recipe, key, file, run id) → its one line and exit 2; any other
    exception → one line naming it and exit 1; with --debug the exception propagates."""
    try:
        yield
    except (typer.Exit, typer.Abort, typer.TyperException):
        raise  # an exit, or a usage error (typer.BadParameter, ...) that typer prints
    except BrokenPipeError:
        # the reader went away (`roll ... | head`): stop quietly, as other command-line
        # tools do; stdout goes to /dev/null so the interpreter's last flush cannot fail
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # fd 1: the pipe that broke
        raise typer.Exit(UNEXPECTED_EXIT) from None
    except Exception as exc:
        if debug_enabled(debug):
            raise
        if not isinstance(exc, _user_error_types()):
            print_error(_first_line(exc), f"an unexpected error; {DEBUG_HINT}")
            raise typer.Exit(UNEXPECTED_EXIT) from None
        print_error(str(exc.args[0]) if exc.args else str(exc))
        raise typer.Exit(USER_ERROR_EXIT) from None


def fail(message: str, hint: str = "") -> NoReturn:
    print_error(message, hint)
    raise typer.Exit(USER_ERROR_EXIT)


class RollGroup(TyperGroup):
    """The root command group: every command runs inside `user_errors`, so no command
    prints a traceback unless asked (`roll --debug COMMAND ...`, ROLL_DEBUG=1), Ctrl-C
    is one word and exit 130, and a usage error (a missing argument, an unknown option, a
    value of the wrong type) is one line too, exit 2, like every other error."""

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(
                args, prog_name, complete_var, standalone_mode, windows_expand_args, **extra
            )
        try:  # not standalone: usage errors come back here instead of typer's framed panel
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except typer.Abort:
            err_console.print(Text("aborted", style="yellow"))
            sys.exit(UNEXPECTED_EXIT)
        except typer.TyperException as exc:  # click's ClickException and its kinds
            _show_click_error(exc)
            sys.exit(getattr(exc, "exit_code", USER_ERROR_EXIT))
        # not standalone, typer returns what the command returned, or an Exit's code
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: Any) -> Any:
        try:
            with user_errors():
                return super().invoke(ctx)
        except KeyboardInterrupt:
            if debug_enabled():
                raise
            err_console.print(Text("interrupted", style="yellow"))
            raise typer.Exit(INTERRUPTED_EXIT) from None
        finally:
            set_global_debug(False)


def _show_click_error(exc: Exception) -> None:
    """`error: Missing argument 'RECIPE'. (roll train --help shows the usage)`; other click
    errors as typer shows them."""
    ctx = getattr(exc, "ctx", None)
    kind = type(exc).__name__
    if kind == "NoArgsIsHelpError":  # its help is already printed
        return
    if ctx is not None and any(c.__name__ == "UsageError" for c in type(exc).__mro__):
        message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
        print_error(message, f"`{ctx.command_path} --help` shows the usage")
        return
    from typer import rich_utils

    rich_utils.rich_format_error(exc)  # type: ignore[arg-type]

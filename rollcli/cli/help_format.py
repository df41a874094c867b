"""`--help` as a reader wants it at 80 columns: paragraphs wrapped by words, and no `<bool>`
beside an on/off flag.

Typer's rich help keeps every line break of a command's docstring after its first
paragraph, so lines written for the source file (~90 columns) came out ragged at 80: a full
line, then a word alone on the next. Each paragraph is joined into one here and rich wraps
it by words to the terminal; a paragraph that starts with click's `\\b` keeps its lines (a
list, a table).

Typer also shows each option's type (`<int>`, `<str>`), which says what value to give; for
an on/off flag (`--dry-run`, `--debug`, `--help`) there is no value, and its `<bool>` read
as if one were wanted (`--dry-run <bool>`). Typer has no setting for either, so the two
functions that decide them are wrapped here, once, for every command.
"""

from __future__ import annotations

from typing import Any

import typer.rich_utils
from typer.core import TyperOption

_label = TyperOption.display_type_rich


def _flag_unlabelled(self: TyperOption, ctx: Any) -> str | None:
    if self.is_bool_flag:
        return None
    return _label(self, ctx)


def reflow(paragraphs: list[str], markup_mode: Any = None) -> str:
    """Paragraphs, each on one line (rich wraps it by words), blank lines between; a
    paragraph starting with `\\b` keeps its line breaks.

    >>> reflow(["a long\\nline", "\\b\\n- one\\n- two"])
    'a long line\\n\\n- one\\n- two'
    """
    out = []
    for text in paragraphs:
        if text.startswith("\b"):
            out.append(text.lstrip("\b").strip("\n"))
        else:
            out.append(" ".join(text.split()))
    return "\n\n".join(out)


def format_help() -> None:
    """Wrap help paragraphs by words and show no type for on/off flags, in every command's
    `--help` (idempotent)."""
    TyperOption.display_type_rich = _flag_unlabelled  # type: ignore[method-assign]
    typer.rich_utils._fix_linebreaks = reflow

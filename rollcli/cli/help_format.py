"""`--help` without a `<bool>` beside every flag.

Typer's rich help shows each option's type (`<int>`, `<str>`), which says what value to
give; for an on/off flag (`--dry-run`, `--debug`, `--help`) there is no value, and its
`<bool>` read as if one were wanted (`--dry-run <bool>`). Typer has no setting for this, so
the one method that labels an option's type is wrapped here, once, for every command: a
flag gets no label, every other option keeps its own.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperOption

_label = TyperOption.display_type_rich


def _flag_unlabelled(self: TyperOption, ctx: Any) -> str | None:
    if self.is_bool_flag:
        return None
    return _label(self, ctx)


def drop_flag_types() -> None:
    """Show no type for on/off flags in every command's `--help` (idempotent)."""
    TyperOption.display_type_rich = _flag_unlabelled  # type: ignore[method-assign]

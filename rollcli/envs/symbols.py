"""Symbol sets of grid environments: one visible character per kind of cell.

Subclasses are frozen dataclasses that only add their fields (with defaults) and a
`legend`; validation and coercion from YAML mappings live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import ClassVar, TypeVar, cast

from gymnasium import spaces

S = TypeVar("S", bound="SymbolSet")


@dataclass(frozen=True)
class SymbolSet:
    env_name: ClassVar[str] = "grid"

    def __post_init__(self) -> None:
        chars = [getattr(self, f.name) for f in fields(self)]
        if any(not isinstance(c, str) or len(c) != 1 or c.isspace() for c in chars):
            raise ValueError(f"{self.env_name} symbols must be single visible characters: {chars}")
        if len(set(chars)) != len(chars):
            raise ValueError(f"{self.env_name} symbols must all differ: {chars}")

    @classmethod
    def coerce(cls: type[S], value: S | Mapping[str, str] | None) -> S:
        """Accept an instance, a mapping of overrides (e.g. from YAML) or None."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        value = cast("Mapping[str, str]", value)  # not an instance: overrides by name
        unknown = set(value) - {f.name for f in fields(cls)}
        if unknown:
            names = ", ".join(f.name for f in fields(cls))
            raise ValueError(f"unknown {cls.env_name} symbol(s) {sorted(unknown)}; known: {names}")
        return replace(cls(), **dict(value))


def grid_text(lines: list[str], spaced: bool) -> str:
    """Rows of single-character cells as text; `spaced` puts a space between cells, so a
    BPE tokenizer gives one token per cell instead of merging runs such as ``___``.

    >>> grid_text(["P_O", "__G"], spaced=True)
    'P _ O\n_ _ G'
    """
    return "\n".join(" ".join(line) if spaced else line for line in lines)


def grid_text_length(rows: int, cols: int, spaced: bool) -> int:
    """Characters of a `grid_text` of `rows` x `cols` cells."""
    return rows * (2 * cols - 1 if spaced else cols) + rows - 1


def grid_space(symbols: SymbolSet, rows: int, cols: int, spaced: bool) -> spaces.Text:
    """The observation space of a `grid_text` of `rows` x `cols` cells drawn with `symbols`.

    >>> grid_space(SymbolSet(), 2, 3, spaced=True).max_length
    11
    """
    charset = "".join(vars(symbols).values()) + "\n "
    return spaces.Text(grid_text_length(rows, cols, spaced), charset=charset)

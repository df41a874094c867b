"""A metric's values over a run's steps, as the plot draws them: the rows that hold a finite
number for it, its (steps, values) series, and a trailing mean."""

from __future__ import annotations

import math
from typing import Any

Row = dict[str, Any]


def rows_with(rows: list[Row], key: str) -> list[Row]:
    """The rows that hold a step and a finite number for `key`."""
    return [
        row
        for row in rows
        if isinstance(row.get(key), (int, float))
        and math.isfinite(row[key])
        and isinstance(row.get("step"), int)
    ]


def series(rows: list[Row], key: str) -> tuple[list[int], list[float]]:
    """Steps and values of `key` over the rows that hold it."""
    kept = rows_with(rows, key)
    return [row["step"] for row in kept], [float(row[key]) for row in kept]


def rolling_mean(values: list[float], window: int) -> list[float]:
    """Trailing mean over up to `window` values.

    >>> rolling_mean([1.0, 3.0, 5.0, 7.0], 2)
    [1.0, 2.0, 4.0, 6.0]
    """
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out

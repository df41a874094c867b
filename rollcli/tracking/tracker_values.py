"""What every tracker shares: the numbers of a metrics row it can log (`scalars`) and a
context that keeps a tracker library's own prints out of the run's display (`quiet`)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def scalars(metrics: dict[str, Any]) -> dict[str, float]:
    """The numbers of a metrics row, without its `step` and `time` bookkeeping.

    >>> scalars({"step": 3, "time": 1.5, "reward/mean": 0.25, "ok": True, "note": "x"})
    {'reward/mean': 0.25}
    """
    return {
        k: float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("step", "time")
    }


@contextlib.contextmanager
def quiet(log: Path) -> Iterator[None]:
    """Keep a tracker library's banners out of the terminal: its stdout and stderr while
    inside go to `log` (the run's trackers.log)."""
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            yield
    finally:
        if buffer.getvalue():
            with log.open("a", encoding="utf-8") as f:
                f.write(buffer.getvalue())

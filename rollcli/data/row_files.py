"""Rows of a data file: jsonl, gzip-compressed jsonl (`.jsonl.gz`) or parquet.

Each row is one JSON object (a dict). A broken line is an error naming the file and line.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from rollcli.data.prompts import DataError


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of `path`; the format follows the suffix (`.parquet`, `.gz`, else jsonl)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise DataError(f"data file {str(path)!r} does not exist")
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DataError("reading parquet needs pyarrow: pip install pyarrow") from None
        return pq.read_table(path).to_pylist()
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise DataError(
                    f"{path}:{n}: a row must be a JSON object, got {type(row).__name__}"
                )
            rows.append(row)
    if not rows:
        raise DataError(f"{path}: no rows")
    return rows


def hold_out_last(rows: list[Any], val_size: int, source: str) -> tuple[list[Any], list[Any]]:
    """(train, validation): the last `val_size` rows are held out."""
    if len(rows) <= val_size:
        raise DataError(
            f"{source} has {len(rows)} usable rows, not more than data.val_size = {val_size}"
        )
    return rows[:-val_size], rows[-val_size:]

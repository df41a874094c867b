"""The one batch type passed between stages: tensors + per-sample fields + meta.

Every tensor and every field has the batch dimension first (length B). `meta` holds values
for the whole batch (step number, timings). Batches pickle cheaply across Ray.

    >>> import torch
    >>> b = Batch({"x": torch.arange(4)}, {"tag": ["a", "b", "c", "d"]})
    >>> [len(part) for part in b.chunk(2)]
    [2, 2]
    >>> Batch.concat(b.chunk(2))["tag"]
    ['a', 'b', 'c', 'd']
    >>> b.repeat(2)["tag"]
    ['a', 'a', 'b', 'b', 'c', 'c', 'd', 'd']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Batch:
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    fields: dict[str, list[Any]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        entries: dict[str, torch.Tensor | list[Any]] = {**self.tensors, **self.fields}
        sizes = {k: len(v) for k, v in entries.items()}
        if len(set(sizes.values())) > 1:
            raise ValueError(f"batch entries disagree on the batch size: {sizes}")

    def __len__(self) -> int:
        values: tuple[torch.Tensor | list[Any], ...] = (
            *self.tensors.values(),
            *self.fields.values(),
        )
        for value in values:
            return len(value)
        return 0

    def __getitem__(self, key: str) -> Any:
        if key in self.tensors:
            return self.tensors[key]
        if key in self.fields:
            return self.fields[key]
        raise KeyError(
            f"batch has no entry {key!r}; it has {sorted(self.tensors) + sorted(self.fields)}"
        )

    def __contains__(self, key: str) -> bool:
        return key in self.tensors or key in self.fields

    def set(self, key: str, value: torch.Tensor | list[Any]) -> None:
        if len(self) and len(value) != len(self):
            raise ValueError(f"{key!r} has {len(value)} rows, the batch has {len(self)}")
        if isinstance(value, torch.Tensor):
            self.tensors[key] = value
        else:
            self.fields[key] = list(value)

    def select(self, index: Sequence[int] | torch.Tensor) -> Batch:
        idx = torch.as_tensor(index, dtype=torch.long)
        picked = idx.tolist()
        return Batch(
            {k: v[idx] for k, v in self.tensors.items()},
            {k: [v[i] for i in picked] for k, v in self.fields.items()},
            dict(self.meta),
        )

    def slice(self, start: int, stop: int) -> Batch:
        return Batch(
            {k: v[start:stop] for k, v in self.tensors.items()},
            {k: v[start:stop] for k, v in self.fields.items()},
            dict(self.meta),
        )

    def chunk(self, n: int) -> list[Batch]:
        """Split into `n` contiguous parts of (nearly) equal size, e.g. one per worker."""
        return [self.slice(start, stop) for start, stop in chunk_bounds(len(self), n)]

    def split(self, size: int) -> list[Batch]:
        """Split into parts of `size` rows (the last may be shorter), e.g. micro-batches."""
        return [self.slice(i, i + size) for i in range(0, len(self), size)]

    def repeat(self, n: int) -> Batch:
        """Repeat every row `n` times in place (row i becomes rows i*n .. i*n+n-1)."""
        return Batch(
            {k: v.repeat_interleave(n, dim=0) for k, v in self.tensors.items()},
            {k: [x for x in v for _ in range(n)] for k, v in self.fields.items()},
            dict(self.meta),
        )

    @staticmethod
    def concat(parts: Sequence[Batch]) -> Batch:
        parts = [p for p in parts if len(p) or p.tensors or p.fields]
        if not parts:
            return Batch()
        keys_t, keys_f = set(parts[0].tensors), set(parts[0].fields)
        for p in parts[1:]:
            if set(p.tensors) != keys_t or set(p.fields) != keys_f:
                raise ValueError("cannot concat batches with different entries")
        meta: dict[str, Any] = {}
        for p in parts:
            meta.update(p.meta)
        return Batch(
            {k: _cat_padded([p.tensors[k] for p in parts]) for k in parts[0].tensors},
            {k: [x for p in parts for x in p.fields[k]] for k in parts[0].fields},
            meta,
        )


def chunk_bounds(total: int, n: int) -> list[tuple[int, int]]:
    """`(start, stop)` of `n` contiguous, near-equal parts of `total` rows (first parts larger).

    >>> chunk_bounds(5, 2)
    [(0, 3), (3, 5)]
    """
    size, rest = divmod(total, n)
    bounds, start = [], 0
    for i in range(n):
        stop = start + size + (1 if i < rest else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def _cat_padded(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Concatenate on dim 0; 2-D tensors of different widths are right-padded with zeros."""
    if tensors[0].dim() >= 2 and len({t.shape[1] for t in tensors}) > 1:
        width = max(t.shape[1] for t in tensors)
        tensors = [torch.nn.functional.pad(t, (0, width - t.shape[1])) for t in tensors]
    return torch.cat(tensors, dim=0)

"""A KV cache layer written in place: the hf engine's decode steps append one position per
step into a buffer allocated once, instead of `DynamicLayer`'s `torch.cat` that copies the
whole layer's cache every step (at batch 64 and ~150 positions, 30 layers: ~0.9 GB of
copies per SmolLM2-135M step).

`keys` / `values` are views of the written positions, so everything that reads a
`DynamicLayer` (masks, sequence length, the session store) reads this one the same way.

A multi-turn batch (`hf_prefill.prefill_sessions`) starts from buffers that hold its
sessions' KV (`session_cache`): its prefill appends the new turns in place too.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer


class BufferLayer(DynamicLayer):
    """A `DynamicLayer` over a `[B, kv_heads, capacity, D]` buffer; it doubles when full."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, capacity: int) -> None:
        """The positions of `keys` / `values` copied into a buffer of `capacity`."""
        length = keys.shape[-2]
        capacity = max(capacity, length)
        self._hold(_copied(keys, capacity, length), _copied(values, capacity, length), length)

    @classmethod
    def over(cls, k_buffer: torch.Tensor, v_buffer: torch.Tensor, length: int) -> BufferLayer:
        """A layer whose first `length` positions of `k_buffer` / `v_buffer` are written
        (the buffers are used as they are, not copied)."""
        layer = cls.__new__(cls)
        layer._hold(k_buffer, v_buffer, length)
        return layer

    def _hold(self, k_buffer: torch.Tensor, v_buffer: torch.Tensor, length: int) -> None:
        DynamicLayer.__init__(self)
        self.dtype, self.device = k_buffer.dtype, k_buffer.device
        self.is_initialized = True
        self.length = length
        self._k, self._v = k_buffer, v_buffer
        self._views()

    def _views(self) -> None:
        self.keys = self._k[:, :, : self.length]
        self.values = self._v[:, :, : self.length]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[-2]
        if end > self._k.shape[-2]:  # more positions than planned: grow (rare)
            self._k = _copied(self._k, 2 * end, self.length)
            self._v = _copied(self._v, 2 * end, self.length)
        self._k[:, :, self.length : end] = key_states
        self._v[:, :, self.length : end] = value_states
        self.length = end
        self._views()
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep rows `indices` (ascending: the decode drops ended rows) in place: row
        `indices[i]` moves to row `i`, from the first row that moves on, written positions
        only; the buffer keeps its size and the views cover the first `len(indices)` rows."""
        keep = indices.tolist()
        if keep != sorted(keep):
            raise ValueError("BufferLayer keeps rows in order only (ascending indices)")
        first = next((i for i, row in enumerate(keep) if row != i), len(keep))
        moved = indices[first:]
        if len(moved):
            for buffer in (self._k, self._v):
                buffer[first : len(keep), :, : self.length] = buffer[moved, :, : self.length]
        self._k, self._v = self._k[: len(keep)], self._v[: len(keep)]
        self._views()

    def take_rows(self, indices: torch.Tensor) -> None:
        """Rows `indices`, in that order and repeats allowed (a copy of those rows)."""
        self._k, self._v = self._k[indices], self._v[indices]
        self._views()

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._k = self._k.repeat_interleave(repeats, dim=0)
        self._v = self._v.repeat_interleave(repeats, dim=0)
        self._views()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a BufferLayer is never cropped (the hf engine's decode only)")


def _copied(states: torch.Tensor, capacity: int, length: int) -> torch.Tensor:
    """A `[B, heads, capacity, D]` buffer holding the first `length` positions of `states`."""
    b, h, _, d = states.shape
    out = states.new_empty(b, h, capacity, d)
    out[:, :, :length] = states[:, :, :length]
    return out


def session_cache(layers: list[tuple[torch.Tensor, torch.Tensor]], length: int):
    """A `DynamicCache` of `BufferLayer`s over `layers` (per layer the key and value buffers,
    `[B, kv_heads, capacity, D]`), their first `length` positions written."""
    from transformers import DynamicCache

    cache = DynamicCache()
    cache.layers = [BufferLayer.over(k, v, length) for k, v in layers]
    return cache


def to_buffers(cache, capacity: int) -> None:
    """Replace `cache`'s full-attention `DynamicLayer`s by `BufferLayer`s of `capacity`
    positions (their current ones copied in); sliding-window layers are left alone."""
    for i, layer in enumerate(cache.layers):
        if type(layer) is DynamicLayer and layer.is_initialized:
            cache.layers[i] = BufferLayer(layer.keys, layer.values, capacity)

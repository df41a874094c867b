"""Give the memory a process has freed back to the operating system.

glibc's allocator keeps freed blocks for reuse instead of returning them, and after a large
block is freed it raises its threshold for serving blocks from fresh mappings (up to 32 MiB),
so a worker that allocates a few GB of tensors in 30-40 MiB pieces, frees them and allocates
differently sized ones next keeps the first set resident. The hf engine's multi-turn calls do
exactly that (each call's KV buffer is sized by the longest conversation in its batch): a
64-episode FrozenLake worker held 3.8 GB after one call whose live tensors were 1.9 GB, and
the next call's buffer came on top. `release_free_memory` (glibc's `malloc_trim(0)`, which
also returns free pages inside the heap) after each call keeps a worker's resident size to
what it holds. A no-op where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl)
        return None


def release_free_memory() -> None:
    """Return the allocator's free pages to the operating system (glibc only)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)

"""Every random-number generator of a process, captured and restored as one object.

A resumed run must draw exactly what the uninterrupted run would have drawn, so a checkpoint
holds python's, numpy's and torch's generator states for the driver and for every worker.

>>> import random, numpy as np
>>> state = capture_rng()
>>> a, b = random.random(), np.random.random()
>>> restore_rng(state)
>>> random.random() == a, np.random.random() == b
(True, True)
>>> import io, torch
>>> buf = io.BytesIO(); torch.save(state, buf); _ = buf.seek(0)
>>> restore_rng(torch.load(buf, weights_only=True))
>>> random.random() == a, np.random.random() == b
(True, True)
"""

from __future__ import annotations

import random
from typing import Any, cast


def capture_rng() -> dict[str, Any]:
    """The generators' states as tensors, ints, floats, strings and tuples only, so a
    checkpoint holding them loads with `torch.load(weights_only=True)` (no code runs)."""
    import numpy as np
    import torch

    # the legacy form is a tuple (numpy's stubs type it as a tuple or a dict)
    legacy = cast("tuple[str, Any, int, int, float]", np.random.get_state(legacy=True))
    name, keys, pos, has_gauss, cached = legacy
    return {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached),
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)  # or an array
    np.random.set_state((name, keys.astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])

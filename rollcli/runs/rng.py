"""Every random-number generator of a process, captured and restored as one object.

A resumed run must draw exactly what the uninterrupted run would have drawn, so a checkpoint
holds python's, numpy's and torch's generator states for the driver and for every worker.

>>> import random
>>> state = capture_rng()
>>> a = random.random()
>>> restore_rng(state)
>>> random.random() == a
True
"""

from __future__ import annotations

import random
from typing import Any


def capture_rng() -> dict[str, Any]:
    import numpy as np
    import torch

    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }


def restore_rng(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])

"""Device mapping syntax and the GPU kinds table.

A role's `device_mapping` names the global GPU indices it runs on (GPU `i` lives on node
`i // gpus_per_node`), or `"cpu"`:

    "0-7"        a closed range, both ends included
    "0,1,2"      a list; ranges and lists mix: "0-3,6,7"
    [0, 1, 2]    a YAML list
    "cpu"        no GPU (the host)
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Literal

GiB = 1024**3
MiB = 1024**2


class PlanError(ValueError):
    """A device mapping or plan request that cannot work; the message says how to fix it."""


def parse_device_mapping(value: str | list[int], *, total_gpus: int) -> list[int] | Literal["cpu"]:
    """Parse a role's device mapping into sorted-as-written GPU indices, or "cpu".

    >>> parse_device_mapping("0-3,6", total_gpus=8)
    [0, 1, 2, 3, 6]
    >>> parse_device_mapping("cpu", total_gpus=0)
    'cpu'
    """
    if isinstance(value, str) and value.strip().lower() == "cpu":
        return "cpu"
    if isinstance(value, str):
        indices = _parse_string(value)
    elif isinstance(value, (list, tuple)):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            raise PlanError(f"device mapping {value!r} must hold integers, e.g. [0, 1, 2, 3]")
        indices = list(value)
    else:
        raise PlanError(
            f"device mapping {value!r} must be a string like '0-7' or '0,1,2', "
            "a list of GPU indices, or 'cpu'"
        )
    if not indices:
        raise PlanError(f"device mapping {value!r} is empty; give GPU indices like '0-7' or 'cpu'")
    negative = [i for i in indices if i < 0]
    if negative:
        raise PlanError(
            f"device mapping {value!r} has negative index {negative[0]}; indices start at 0"
        )
    if len(set(indices)) < len(indices):  # linear: a cluster may have 100,000 GPUs
        dupe = min(i for i, n in Counter(indices).items() if n > 1)
        raise PlanError(
            f"device mapping {value!r} lists GPU {dupe} more than once; list each GPU once"
        )
    if total_gpus <= 0:
        raise PlanError(
            f"device mapping {value!r} names GPUs but the cluster has none; "
            "use 'cpu' or pass --gpus N"
        )
    beyond = [i for i in indices if i >= total_gpus]
    if beyond:
        raise PlanError(
            f"device mapping {value!r} uses GPU {beyond[0]} but the cluster has {total_gpus} "
            f"GPU(s) (0-{total_gpus - 1}); use indices below {total_gpus} or pass --gpus "
            f"{max(indices) + 1}"
        )
    return indices


def format_indices(indices: list[int]) -> str:
    """The inverse of parsing: [0, 1, 2, 5] -> "0-2,5"."""
    if len(indices) > 1 and indices == list(range(indices[0], indices[0] + len(indices))):
        return f"{indices[0]}-{indices[-1]}"  # one range, found at C speed (100,000 GPUs)
    parts: list[str] = []
    start = None
    for i, g in enumerate(indices):
        if start is None:
            start = g
        if i + 1 == len(indices) or indices[i + 1] != g + 1:
            parts.append(str(start) if start == g else f"{start}-{g}")
            start = None
    return ",".join(parts)


_RANGE = re.compile(r"^(\d+)\s*-\s*(\d+)$")


def _parse_string(value: str) -> list[int]:
    indices: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if not part:
            if value.strip():
                raise PlanError(f"device mapping {value!r} has an empty item; write '0,1,2'")
            continue
        match = _RANGE.match(part)
        if match:
            lo, hi = int(match.group(1)), int(match.group(2))
            if lo > hi:
                raise PlanError(
                    f"device mapping {value!r} has reversed range '{part}'; write '{hi}-{lo}'"
                )
            indices.extend(range(lo, hi + 1))
        elif part.lstrip("-").isdigit():
            indices.append(int(part))
        else:
            raise PlanError(
                f"device mapping {value!r} has unreadable item {part!r}; "
                "use ranges and indices like '0-3,6,7' or 'cpu'"
            )
    return indices


# Total memory as the driver reports it (nvidia-smi "Total", MiB); a few percent above
# what a process can allocate once the CUDA context is up.
GPU_KINDS: dict[str, int] = {
    "h200": 143771 * MiB,
    "h100-80g": 81559 * MiB,
    "a100-80g": 81920 * MiB,
    "a100-40g": 40960 * MiB,
    "a6000": 49140 * MiB,
    "l40s": 46068 * MiB,
    "l4": 23034 * MiB,
    "a10g": 23028 * MiB,
    "4090": 24564 * MiB,
    "3090": 24576 * MiB,
    "v100-32g": 32768 * MiB,
    "v100-16g": 16384 * MiB,
}

_ALIASES = {"h100": "h100-80g", "rtx4090": "4090", "rtx3090": "3090", "rtx-a6000": "a6000"}
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(g|gb|gib)$")


def gpu_memory(kind_or_bytes: str | int) -> int:
    """Memory of one GPU in bytes: a kind from `GPU_KINDS`, a size like "80GiB", or bytes.

    "80g", "80gb" and "80gib" all mean 80 GiB.

    >>> gpu_memory("a100-40g") == 40 * 1024**3
    True
    >>> gpu_memory("24gb") == 24 * 1024**3
    True
    """
    if isinstance(kind_or_bytes, bool):
        raise PlanError(f"GPU memory {kind_or_bytes!r} must be a GPU kind or a byte count")
    if isinstance(kind_or_bytes, int):
        if kind_or_bytes <= 0:
            raise PlanError(f"GPU memory {kind_or_bytes} must be a positive byte count")
        return kind_or_bytes
    key = kind_or_bytes.strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key in GPU_KINDS:
        return GPU_KINDS[key]
    size = _SIZE.match(key)
    if size:
        return int(float(size.group(1)) * GiB)
    raise PlanError(
        f"unknown GPU kind {kind_or_bytes!r}; use one of {', '.join(GPU_KINDS)} "
        "or a size such as '80GiB'"
    )

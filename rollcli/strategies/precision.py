"""A worker's numeric precision, as the run's plan decided it (see runtime/role_args.py).

Training: `fp32` (the CPU), or `bf16-mixed` (GPUs): fp32 master weights with bf16 compute.
The `hf` strategy keeps its weights, gradients and Adam states in fp32 and runs forward and
backward under `torch.autocast(bfloat16)`; DeepSpeed runs its `bf16` mode (bf16 weights and
gradients, fp32 master weights inside its optimizer). Either way 16 bytes of model states
per parameter, the plan's 2 + 2 + 12. Inference and reference weights take a plain dtype.
"""

from __future__ import annotations

import contextlib

import torch

from rollcli.config.precision_spec import PRECISIONS, TRAIN_PRECISIONS

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# autocast's cast cache keeps a bf16 copy of every weight it casts until the region ends (2
# bytes/param at the update's peak, memory.AUTOCAST_WEIGHT_COPY_BYTES); the GPU proof kit's
# `hf-nocache` case measures the update without it
AUTOCAST_CACHE = True


def check_precision(precision: str) -> str:
    """`precision` where it is a training precision (fp32, bf16-mixed: a worker's
    `train.precision`, the plan's), else a ValueError naming those.

    >>> check_precision("bf16-mixed")
    'bf16-mixed'
    """
    if precision not in TRAIN_PRECISIONS:
        raise ValueError(f"precision {precision!r}: choose one of {', '.join(TRAIN_PRECISIONS)}")
    return precision


def torch_dtype(name: str) -> torch.dtype:
    """>>> torch_dtype("bfloat16")
    torch.bfloat16
    """
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r}: choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def kept_casts(device: torch.device) -> contextlib.AbstractContextManager:
    """Around one optimizer step's micro-batches of a `bf16-mixed` hf update: each weight is
    cast to bf16 once for all of them, not once per micro-batch. Autocast clears its cast
    cache when its outermost region ends; this region (autocast off: the backward passes
    inside it run as they would outside) holds the forwards' regions inside it, so the
    cache lives until the optimizer steps and no cast outlives the weights it copies. On a
    CPU the per-micro-batch casts were a fifth of an rlvr-math update (3 micro-batches)."""
    return torch.autocast(device.type, enabled=False)


def compute_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """Where an `hf` worker runs forward and backward: bf16 autocast for `bf16-mixed`."""
    if PRECISIONS[check_precision(precision)].bf16_compute:
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=AUTOCAST_CACHE)
    return contextlib.nullcontext()

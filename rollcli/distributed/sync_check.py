"""A cheap fingerprint of weights, to verify a weight sync: what the engine holds after it
is what the trainer sent.

Each tensor's print is taken over the bits of up to `SAMPLES` of its elements, evenly
spaced, read as integers of the element's width (so NaNs and signed zeros compare too):
their sum and their position-weighted sum, in int64 (wrapping alike on both sides). The
sender prints each tensor as it sends it (cast to the receivers' dtype, LoRA merged), a
receiver prints what its model holds once the sync ends (the `hf` engine's tensors, copied
in place) or what arrived (an engine that loads a stream: vLLM), each where the weights
live, so the check moves a few numbers per tensor, never the weights. A tensor left stale
by a sync differs in practically every sampled element.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

SAMPLES = 1024
_INT_OF_WIDTH = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

Print = tuple[int, int]


def tensor_print(tensor: torch.Tensor) -> Print:
    """The fingerprint of one tensor (its dtype's bits at evenly spaced elements).

    >>> t = torch.arange(10, dtype=torch.float32)
    >>> tensor_print(t) == tensor_print(t.clone()), tensor_print(t) == tensor_print(t + 1)
    (True, False)
    """
    flat = tensor.detach().reshape(-1)
    n = flat.numel()
    if n > SAMPLES:
        stride = n // SAMPLES
        flat = flat[torch.arange(SAMPLES, device=flat.device) * stride + stride // 2]
    bits = flat.contiguous().view(_INT_OF_WIDTH[flat.element_size()]).to(torch.int64)
    weights = torch.arange(1, bits.numel() + 1, dtype=torch.int64, device=bits.device)
    return int(bits.sum()), int((bits * weights).sum())


def prints(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, Print]:
    """`{name: print}` of `(name, tensor)` pairs."""
    return {name: tensor_print(t) for name, t in named}


def first_difference(sent: dict[str, Print], held: dict[str, Print]) -> str | None:
    """The first tensor (in the sent order) whose print differs or is missing, else None.

    >>> first_difference({"a": (1, 1), "b": (2, 2)}, {"a": (1, 1), "b": (2, 3)})
    'b'
    """
    for name, value in sent.items():
        if held.get(name) != value:
            return name
    extra = sorted(set(held) - set(sent))
    return extra[0] if extra else None

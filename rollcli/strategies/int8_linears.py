"""int8 linears for the hf engine's rollout (`rollout.precision: int8`, CPU).

Every `nn.Linear` of the engine's model (the LM head included) gets an int8 copy of its
weight, quantized per output row (symmetric, scale = max |w| / 127), and computes with int8
activations quantized per row (per token) at each call: `torch._int_mm` multiplies the two
into int32, which is rescaled by both scales to fp32 (W8A8). The fp32 weights stay where
they are, under their own names, so a weight sync writes them as before; `quantize` then
re-packs the int8 copies (the engine calls it after every sync). Norms, attention, the
embedding and the sampling stay in fp32.

Why per row: fbgemm's dynamic int8 linear (what `torch.ao.quantization.quantize_dynamic`
runs, deprecated) scales the activations per tensor, so one outlier feature coarsens every
token's; on smollm2-135m its sampled tokens' log-probs were 0.42 nats from fp32's on average
against 0.18 per row (weights alone in int8: 0.05; a bf16 model: 0.03), docs/performance.md.
`_int_mm` needs more than 16 rows: a smaller batch is padded with zero rows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

MIN_ROWS = 17  # torch._int_mm's least row count


@dataclass(frozen=True)
class Packed:
    """A linear's int8 weight, transposed (`[in, out]`), its per-output-row scales, bias."""

    weight: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor | None


def quantizable(linear: torch.nn.Linear) -> bool:
    """`_int_mm` takes inner and outer sizes that are multiples of 8."""
    return linear.in_features % 8 == 0 and linear.out_features % 8 == 0


def pack(weight: torch.Tensor, bias: torch.Tensor | None) -> Packed:
    """The int8 copy of `weight` (`[out, in]`): one scale per output row."""
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-12)
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    b = None if bias is None else bias.detach().float().clone()
    return Packed(q.t().contiguous(), scale, b)


def int8_linear(x: torch.Tensor, packed: Packed) -> torch.Tensor:
    """`x @ W^T + b` with the int8 `W` and `x` quantized per row (fp32 in and out)."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1]).float()
    scale = (rows.abs().amax(dim=1, keepdim=True) / 127.0).clamp_min_(1e-12)
    q = torch.round(rows / scale).to(torch.int8)  # within [-127, 127] by the scale
    n = q.shape[0]
    if n < MIN_ROWS:
        q = torch.nn.functional.pad(q, (0, 0, 0, MIN_ROWS - n))
    out = torch._int_mm(q, packed.weight)[:n].float().mul_(scale).mul_(packed.scale)
    if packed.bias is not None:
        out.add_(packed.bias)
    return out.reshape(*shape[:-1], out.shape[-1])


class Int8Linears:
    """The int8 copies of a model's linears, and their forward: each linear's `forward`
    is replaced on the instance (the module, its parameters and their names unchanged). A
    linear whose sizes `_int_mm` does not take stays fp32."""

    def __init__(self, model: torch.nn.Module) -> None:
        if next(model.parameters()).device.type != "cpu":
            raise ValueError("int8 linears run on the CPU (fbgemm); this model is not on it")
        self.linears = [m for m in model.modules() if type(m) is torch.nn.Linear and quantizable(m)]
        self.packed: dict[int, Packed] = {}
        for linear in self.linears:
            linear.forward = functools.partial(self._forward, id(linear))  # type: ignore[method-assign]
        self.quantize()

    def _forward(self, key: int, x: torch.Tensor) -> torch.Tensor:
        return int8_linear(x, self.packed[key])

    @torch.no_grad()
    def quantize(self) -> None:
        """(Re-)pack every linear's current fp32 weight: after loading or a weight sync."""
        self.packed = {id(m): pack(m.weight, m.bias) for m in self.linears}

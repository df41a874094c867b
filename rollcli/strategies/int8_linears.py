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
against 0.20 per row (weights alone in int8: 0.05; a bf16 model: 0.03), docs/performance.md.
`_int_mm` needs more than 16 rows: a smaller batch is padded with zero rows. Linears of one
module that take the same input (q/k/v, gate/up) are one product of their stacked weights:
one quantization of the input, bigger matmuls, the same numbers (2.00x -> 2.48x transformers
`generate` at batch 64, bench/rollout.py).
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


# linears of one module that take the same input: one int8 product (one quantization of it)
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class _Group:
    """Linears computed as one int8 product: a layer's q/k/v or gate/up (their weights
    stacked), or a single linear. The product of an input is kept until every member has
    taken its part (the model calls them one after another with the same tensor)."""

    def __init__(self, linears: list[torch.nn.Linear]) -> None:
        self.linears = linears
        self.sizes = [m.out_features for m in linears]
        self.packed: Packed | None = None
        self.input: torch.Tensor | None = None
        self.parts: tuple[torch.Tensor, ...] = ()
        self.waiting: set[int] = set()

    def quantize(self) -> None:
        weight = torch.cat([m.weight.detach() for m in self.linears])
        biases = [m.bias for m in self.linears]
        bias = None
        if any(b is not None for b in biases):
            bias = torch.cat(
                [
                    b.detach() if b is not None else m.weight.new_zeros(m.out_features)
                    for m, b in zip(self.linears, biases, strict=True)
                ]
            )
        self.packed = pack(weight, bias)
        self.input, self.parts = None, ()

    def forward(self, member: int, x: torch.Tensor) -> torch.Tensor:
        assert self.packed is not None
        if len(self.linears) == 1:
            return int8_linear(x, self.packed)
        if self.input is not x:  # a new input: its product for every member
            self.input = x
            self.parts = int8_linear(x, self.packed).split(self.sizes, dim=-1)
            self.waiting = set(range(len(self.linears)))
        part = self.parts[member].contiguous()
        self.waiting.discard(member)
        if not self.waiting:  # every member took its part: let the input go
            self.input, self.parts = None, ()
        return part


def _groups(model: torch.nn.Module) -> list[_Group]:
    """Every quantizable linear of `model` in a group: siblings (SIBLINGS) of one module
    with one input size together, the others alone."""
    grouped: set[int] = set()
    groups = []
    for module in model.modules():
        children = dict(module.named_children())
        for names in SIBLINGS:
            members = [children.get(n) for n in names]
            if all(type(m) is torch.nn.Linear and quantizable(m) for m in members) and (
                len({m.in_features for m in members}) == 1  # type: ignore[union-attr]
            ):
                groups.append(_Group(members))  # type: ignore[arg-type]
                grouped.update(id(m) for m in members)
    for m in model.modules():
        if type(m) is torch.nn.Linear and quantizable(m) and id(m) not in grouped:
            groups.append(_Group([m]))
    return groups


class Int8Linears:
    """The int8 copies of a model's linears, and their forward: each linear's `forward`
    is replaced on the instance (the module, its parameters and their names unchanged). A
    linear whose sizes `_int_mm` does not take stays fp32; siblings that take the same
    input (q/k/v, gate/up) share one product."""

    def __init__(self, model: torch.nn.Module) -> None:
        if next(model.parameters()).device.type != "cpu":
            raise ValueError("int8 linears run on the CPU (torch._int_mm); this model is not")
        self.groups = _groups(model)
        self.linears = [m for g in self.groups for m in g.linears]
        for group in self.groups:
            for member, linear in enumerate(group.linears):
                linear.forward = functools.partial(group.forward, member)  # type: ignore[method-assign]
        self.quantize()

    @torch.no_grad()
    def quantize(self) -> None:
        """(Re-)pack every linear's current fp32 weight: after loading or a weight sync."""
        for group in self.groups:
            group.quantize()

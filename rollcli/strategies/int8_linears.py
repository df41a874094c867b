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
one quantization of the input, bigger matmuls, the same numbers unsmoothed (2.00x -> 2.48x
transformers `generate` at batch 64, bench/rollout.py); smoothed, the group shares one s per
input channel, from its stacked weights.

Smoothing (SmoothQuant, Xiao et al. 2023): per-row activation scales leave a token's small
features coarse when a few of its channels are large. Each linear's input channel j is
divided by s_j = max|x_j|^0.5 / max|W_j|^0.5 and its weight column multiplied by it (the
product unchanged in exact arithmetic), which moves half of the activations' range into
the weights. max|x_j| is what the engine has seen: every int8 product records its inputs'
per-channel maxima, the engine's first `generate` runs unsmoothed and re-packs when it ends,
and each later re-pack (after a weight sync) uses the maxima seen so far. On smollm2-135m
it cut KL(mu || pi) per sampled token from 0.044 to 0.016 (bench/rollout_mismatch.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from rollcli.strategies.bf16_linears import experts_modules

MIN_ROWS = 17  # torch._int_mm's least row count
ALPHA = 0.5  # SmoothQuant's migration strength: the share of the range moved to the weights


@dataclass(frozen=True)
class Packed:
    """A linear's int8 weight, transposed (`[in, out]`), its per-output-row scales, bias,
    and `inverse`: 1 / s per input channel when smoothed (the input is multiplied by it)."""

    weight: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor | None
    inverse: torch.Tensor | None = None


def quantizable(linear: torch.nn.Linear) -> bool:
    """`_int_mm` takes inner and outer sizes that are multiples of 8."""
    return linear.in_features % 8 == 0 and linear.out_features % 8 == 0


def smoothing(act_max: torch.Tensor, weight_max: torch.Tensor) -> torch.Tensor:
    """SmoothQuant's s_j = max|x_j|^a / max|W_j|^(1-a) per input channel. A channel the
    inputs seen so far never (or barely) used counts as 1% of the mean channel's maximum, so
    its s cannot shrink toward 0 and blow up a later input that does use it.

    >>> smoothing(torch.tensor([4.0, 1.0]), torch.tensor([1.0, 4.0])).tolist()
    [2.0, 0.5]
    """
    floor = act_max.mean() * 0.01
    act = act_max.clamp_min(floor).clamp_min(1e-8)
    return act.pow(ALPHA) / weight_max.clamp_min(1e-8).pow(1 - ALPHA)


def pack(
    weight: torch.Tensor, bias: torch.Tensor | None, act_max: torch.Tensor | None = None
) -> Packed:
    """The int8 copy of `weight` (`[out, in]`): one scale per output row; smoothed by the
    inputs' per-channel maxima `act_max` when given."""
    w = weight.detach().float()
    inverse = None
    if act_max is not None:
        s = smoothing(act_max, w.abs().amax(dim=0))
        w = w * s
        inverse = 1.0 / s
    scale = (w.abs().amax(dim=1) / 127.0).clamp_min(1e-12)
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    b = None if bias is None else bias.detach().float().clone()
    return Packed(q.t().contiguous(), scale, b, inverse)


def int8_linear(
    x: torch.Tensor, packed: Packed, act_max: torch.Tensor | None = None
) -> torch.Tensor:
    """`x @ W^T + b` with the int8 `W` and `x` quantized per row (fp32 in and out).
    `act_max`, if given, is raised in place to this input's per-channel max |x|."""
    shape = x.shape
    rows = x.reshape(-1, shape[-1]).float()
    if packed.inverse is not None:
        rows = rows * packed.inverse
    magnitude = rows.abs()
    if act_max is not None:
        seen = magnitude.amax(dim=0)
        if packed.inverse is not None:
            seen.div_(packed.inverse)
        torch.maximum(act_max, seen, out=act_max)
    scale = (magnitude.amax(dim=1, keepdim=True) / 127.0).clamp_min_(1e-12)
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
        self.act_max = torch.zeros(linears[0].in_features)  # per input channel, seen so far
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
        self.packed = pack(weight, bias, self.act_max if bool(self.act_max.any()) else None)
        self.input, self.parts = None, ()

    def forward(self, member: int, x: torch.Tensor) -> torch.Tensor:
        assert self.packed is not None
        if len(self.linears) == 1:
            return int8_linear(x, self.packed, self.act_max)
        if self.input is not x:  # a new input: its product for every member
            self.input = x
            self.parts = int8_linear(x, self.packed, self.act_max).split(self.sizes, dim=-1)
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
    input (q/k/v, gate/up) share one product (and one smoothing of it). `smoothed`: the
    copies are packed with the per-channel maxima of the inputs seen (module docstring)."""

    def __init__(self, model: torch.nn.Module) -> None:
        if next(model.parameters()).device.type != "cpu":
            raise ValueError("int8 linears run on the CPU (torch._int_mm); this model is not")
        if experts_modules(model):  # the planner refuses it first (role_precision.py)
            raise ValueError(
                "int8 linears leave an MoE model's experts (3-D weights, no linears) in fp32; "
                "use bf16 copies (bf16_linears.py), which cover them"
            )
        self.groups = _groups(model)
        self.linears = [m for g in self.groups for m in g.linears]
        for group in self.groups:
            for member, linear in enumerate(group.linears):
                linear.forward = functools.partial(group.forward, member)  # type: ignore[method-assign]
        self.quantize()

    @torch.no_grad()
    def quantize(self) -> None:
        """(Re-)pack every linear's current fp32 weight, smoothed by the inputs seen so far
        (none at first): after loading, the first generation, and each weight sync."""
        for group in self.groups:
            group.quantize()
        self.smoothed = any(g.packed.inverse is not None for g in self.groups)  # type: ignore[union-attr]

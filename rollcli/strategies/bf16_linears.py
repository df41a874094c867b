"""bf16 linears for the hf engine's rollout on a CPU (`rollout.precision: bf16`).

Every `nn.Linear` of the engine's model (the LM head included) gets a bf16 copy of its
weight; a call casts its input to bf16, multiplies in bf16 (oneDNN accumulates in fp32 and
rounds the product to bf16) and hands fp32 on. The fp32 weights stay where they are, under
their own names, so a weight sync writes them as before; `quantize` then re-casts the
copies (the engine calls it after every sync, as for the int8 copies). Norms, rotary,
attention and its KV cache, the embedding and the sampling stay fp32.

Why the linears only: a model loaded whole in bf16 sampled slower than fp32 on an AVX-512
BF16 CPU (155 against 190 tokens/s at batch 64, docs/performance.md), as every norm, rotary
and attention op then converts, while the linears' matmuls at a decode batch run 2-3x
fp32's there (bench/int8_matmul.py: 13.6 against 40.5 ms over smollm2-135m's five shapes).
It is the same split as the trainer's bf16-mixed (`torch.autocast`: linears in bf16, the
reductions in fp32), but not the same numbers: the two round their products apart (other
shapes, other orders), so against a bf16-mixed trainer the sampler's log-probs differ more
than an fp32 engine's (rlvr-math: KL(mu || pi_old) per token ~0.001 against ~0.0003), which
the off-policy correction (`tis`, auto for a low-precision rollout) reweighs.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F


class Bf16Linears:
    """The bf16 copies of a model's linears, and their forward: each linear's `forward` is
    replaced on the instance (the module, its parameters and their names unchanged)."""

    def __init__(self, model: torch.nn.Module) -> None:
        if next(model.parameters()).device.type != "cpu":
            raise ValueError("bf16 linears are the CPU engine's; on a GPU load the model in bf16")
        self.linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        for linear in self.linears:
            linear.forward = functools.partial(self._forward, id(linear))  # type: ignore[method-assign]
        self.quantize()

    @torch.no_grad()
    def quantize(self) -> None:
        """(Re-)cast every linear's current fp32 weight and bias to its bf16 copy."""
        for linear in self.linears:
            bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
            self.copies[id(linear)] = (linear.weight.detach().to(torch.bfloat16), bias)

    def _forward(self, key: int, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.copies[key]
        return F.linear(x.to(torch.bfloat16), weight, bias).float()

    def nbytes(self) -> int:
        """The copies' bytes (what the plan counts beside the fp32 weights)."""
        return sum(
            w.numel() * w.element_size() + (0 if b is None else b.numel() * b.element_size())
            for w, b in self.copies.values()
        )

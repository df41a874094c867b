"""bf16 linears for the hf engine's rollout on a CPU (`rollout.precision: bf16`).

Every `nn.Linear` of the engine's model (the LM head included) gets a bf16 copy of its
weight; a call casts its input to bf16, multiplies in bf16 (oneDNN accumulates in fp32 and
rounds the product to bf16) and hands fp32 on. The fp32 weights stay where they are, under
their own names, so a weight sync writes them as before; `quantize` then re-casts the
copies (the engine calls it after every sync, as for the int8 copies). Norms, rotary,
attention and its KV cache, the embedding and the sampling stay fp32.

An MoE model's experts are no linears: transformers 5 keeps them as 3-D parameters of an
experts module (Qwen3-MoE: `mlp.experts.gate_up_proj [E, 2I, H]`, `mlp.experts.down_proj
[E, H, I]`). Each experts module gets bf16 copies of all its parameters, and its forward runs
transformers' own (the model's `experts_implementation`, `grouped_mm` or the eager loop) on
a view of the module that holds the copies, on bf16 hidden states; its output goes on in
fp32. The router (Qwen3-MoE's `mlp.gate`, a module of its own) stays fp32, so a token's
experts are chosen from fp32 logits, as in the trainer.

Why the linears (and experts) only: a model loaded whole in bf16 sampled slower than fp32 on an AVX-512
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
from typing import Any

import torch
import torch.nn.functional as F


def experts_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules that hold 3-D parameters: an MoE model's experts (none in a dense one)."""
    return [m for m in model.modules() if any(p.ndim == 3 for p in m.parameters(recurse=False))]


class _WithCopies:
    """An experts module as its forward sees it, its parameters replaced by `copies`: every
    other attribute (config, activation, layout flags, methods) is the module's."""

    def __init__(self, module: torch.nn.Module, copies: dict[str, torch.Tensor]) -> None:
        self.__dict__.update(copies)
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


class Bf16Linears:
    """The bf16 copies of a model's linears and experts, and their forward: each one's
    `forward` is replaced on the instance (the module, its parameters and their names
    unchanged)."""

    def __init__(self, model: torch.nn.Module) -> None:
        if next(model.parameters()).device.type != "cpu":
            raise ValueError("bf16 linears are the CPU engine's; on a GPU load the model in bf16")
        self.linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
        self.experts = experts_modules(model)
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = {}
        self.expert_copies: dict[int, dict[str, torch.Tensor]] = {}
        for linear in self.linears:
            linear.forward = functools.partial(self._forward, id(linear))  # type: ignore[method-assign]
        for module in self.experts:
            module.forward = functools.partial(self._experts_forward, module)  # type: ignore[method-assign]
        self.quantize()

    @torch.no_grad()
    def quantize(self) -> None:
        """(Re-)cast every linear's current fp32 weight and bias, and every experts module's
        parameters, to their bf16 copies."""
        for linear in self.linears:
            bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
            self.copies[id(linear)] = (linear.weight.detach().to(torch.bfloat16), bias)
        for module in self.experts:
            self.expert_copies[id(module)] = {
                name: p.detach().to(torch.bfloat16)
                for name, p in module.named_parameters(recurse=False)
            }

    def _forward(self, key: int, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.copies[key]
        return F.linear(x.to(torch.bfloat16), weight, bias).float()

    def _experts_forward(self, module: torch.nn.Module, hidden: torch.Tensor, *routing: Any):
        """transformers' forward of `module` (its class's, which picks the implementation)
        on the bf16 copies and bf16 hidden states; the routing weights stay as given."""
        view = _WithCopies(module, self.expert_copies[id(module)])
        return type(module).forward(view, hidden.to(torch.bfloat16), *routing).float()

    def nbytes(self) -> int:
        """The copies' bytes (what the plan counts beside the fp32 weights)."""
        linears = sum(
            w.numel() * w.element_size() + (0 if b is None else b.numel() * b.element_size())
            for w, b in self.copies.values()
        )
        experts = sum(
            t.numel() * t.element_size() for c in self.expert_copies.values() for t in c.values()
        )
        return linears + experts

"""The hf engine's static decode: transformers' `StaticCache` of a fixed batch and length,
and on CUDA each decode step replayed as one captured CUDA graph.

On a GPU the dynamic decode (`hf_kv_buffer`: rows leave the batch as they end) is bound by
per-step overhead, not by the device: each step launches a few hundred small kernels from
Python and waits for the host, so 256 steps took ~18 s whatever the batch (64 or 256) and
model (qwen2.5-0.5b or 7b) on an H100 (docs/gpu.md, #68). A CUDA graph replays a step's
kernels in one launch, but only over tensors whose shapes and addresses never change: here
the `StaticCache` (`[rows, kv_heads, width + new_tokens, head_dim]` per layer, written in
place at its own device-side counter), the step's inputs (token, position, one additive
attention mask `[rows, 1, 1, width + new_tokens]`) and its logits. Rows that ended stay in
the batch and keep decoding unread tokens; the engine samples only the live rows' logits,
so the random draws are the dynamic path's (`HFInferEngine._decode_static`).

The prefill is the engine's own (`hf_prefill.prefill`, one forward over the chunk's
prompts); its KV is copied once into the static cache, each prompt's rows repeated for its
`n` samples. The mask is a 4-D additive one, which transformers hands to the attention as
it is (`attention_masks`): no mask is built, and no host sync happens inside the step.

Models this does not fit (sliding-window or other non-full-attention layers, an attention
that reads no 4-D mask such as flash attention) are named by `static_refusal`, and the
engine keeps the dynamic decode for them. Transformers 5.17 (the GPU machine's) and 5.19
(this venv's) have the same `StaticLayer` (`cumulative_length` as the write position).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from rollcli.strategies.attention_masks import MASKED_ATTENTION, attention_implementation
from rollcli.strategies.hf_prefill import Prefilled

# eager steps before a step is captured: CUDA's lazy initialisations (cuBLAS workspaces,
# kernel choices) happen outside the graph, on a side stream as torch's graph docs ask
WARMUP_STEPS = 2


def static_refusal(model: torch.nn.Module) -> str | None:
    """Why `model` cannot decode with a static cache here (None: it can)."""
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    impl = attention_implementation(model)
    if impl not in MASKED_ATTENTION:
        return f"its attention {impl!r} reads no 4-D mask (static decode needs one of {MASKED_ATTENTION})"
    try:
        layers = StaticCache(config=model.config, max_cache_len=1).layers
    except (ValueError, KeyError, TypeError) as err:
        return f"transformers builds no StaticCache for it ({err})"
    kinds = {type(layer).__name__ for layer in layers if type(layer) is not StaticLayer}
    if kinds:
        return (
            f"it has {', '.join(sorted(kinds))} cache layers (static decode: full attention only)"
        )
    if not hasattr(layers[0], "cumulative_length"):  # a transformers before 5.x's StaticLayer
        return "this transformers' StaticLayer keeps no cumulative_length (5.17+ does)"
    return None


class StaticDecode:
    """A chunk's decode state: `rows = prompts · n` rows of a static cache filled from the
    prefill, and `step` computing the next logits of every row from the tokens of the live
    ones (`forward`: the engine's decode forward, keyword inputs to `[rows, V]` logits)."""

    def __init__(
        self,
        model: torch.nn.Module,
        done: Prefilled,
        n: int,
        new_tokens: int,
        forward: Callable[..., torch.Tensor],
        cuda_graphs: bool,
    ) -> None:
        from transformers import StaticCache

        prompts, width = done.mask.shape
        rows = prompts * n
        self.width, self.forward, self.cuda_graphs = width, forward, cuda_graphs
        first = done.cache.layers[0].keys
        self.cache = StaticCache(config=model.config, max_cache_len=width + new_tokens)
        self.cache.early_initialization(
            batch_size=rows,
            num_heads=first.shape[1],
            head_dim=first.shape[3],
            dtype=first.dtype,
            device=first.device,
        )
        for static, prefilled in zip(self.cache.layers, done.cache.layers, strict=True):
            for buffer, states in (
                (static.keys, prefilled.keys),
                (static.values, prefilled.values),
            ):
                # each prompt's n rows are adjacent: the buffer seen as [prompts, n, ...]
                buffer.view(prompts, n, *buffer.shape[1:])[:, :, :, :width] = states[:, None]
            static.cumulative_length.fill_(width)
        dtype, device = first.dtype, first.device
        allowed = torch.zeros(rows, width + new_tokens, dtype=torch.bool, device=device)
        allowed[:, :width] = done.mask.bool().repeat_interleave(n, dim=0)
        self.mask = torch.zeros(allowed.shape, dtype=dtype, device=device)
        self.mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        self.mask = self.mask[:, None, None, :]  # [rows, 1, 1, length]: every layer reads it
        self.positions = done.next_position.repeat_interleave(n)[:, None].clone()
        self.tokens = torch.zeros(rows, 1, dtype=torch.long, device=device)
        self.steps = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None  # the graph's output, rewritten by each replay

    def step(self, tokens: torch.Tensor, live: torch.Tensor | None) -> torch.Tensor:
        """`[rows, V]` logits of the position after `tokens` (the live rows' new tokens;
        `live`: their row indices, None when every row is live)."""
        if live is None:
            self.tokens[:, 0] = tokens
        else:
            self.tokens[live, 0] = tokens
        self.mask[:, :, :, self.width + self.steps] = 0  # each row now sees its new position
        if self.graph is not None:
            self.graph.replay()
            logits = self.logits
        elif self.cuda_graphs and self.steps >= WARMUP_STEPS:
            logits = self._capture()
        elif self.cuda_graphs:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                logits = self._forward()
            torch.cuda.current_stream().wait_stream(side)
        else:
            logits = self._forward()
        self.positions.add_(1)
        self.steps += 1
        return logits

    def _forward(self) -> torch.Tensor:
        return self.forward(
            input_ids=self.tokens,
            attention_mask=self.mask,
            position_ids=self.positions,
            past_key_values=self.cache,
            use_cache=True,
        )

    def _capture(self) -> torch.Tensor:
        """Record one step (capturing runs nothing), then replay it for this step."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self._forward()
        self.graph = graph
        graph.replay()
        return self.logits

"""What every inference engine (`hf`, `vllm`, `sglang`) takes and returns: the sampling
settings of a call (`SamplingParams`), one sample (`Generation`), the callback that hears of
each sample as it ends (`OnSample`) and the progress another thread reads while a call runs
(`GenerationProgress`).

One module of plain types (no torch), so the rollout schedulers, the evaluation and the
workers name them without importing an engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1
    max_new_tokens: int = 64
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    stop_token_ids: tuple[int, ...] = ()  # end a sample like EOS does (kept in the output)


@dataclass
class Generation:
    prompt_index: int
    token_ids: list[int]
    finished: bool
    # log-prob of each sampled token, the behaviour policy: under softmax(logits / T) as the
    # trainer computes it (the hf engine, top-k / top-p left out: strategies/hf_infer.py);
    # vllm and sglang report it under the truncated distribution (planning refuses the
    # corrections that would be biased by it)
    logprobs: list[float] | None = None
    sample: int = 0  # which of the prompt's `n` samples this is
    cached_tokens: int = 0  # leading prompt tokens whose KV came from the prompt's session
    # an MoE model's chosen experts at each prompt and response token, `[P + R, layers, k]`
    # (`models/moe_routing.py`: the last response token was never fed, so it is UNSET)
    routed_experts: torch.Tensor | None = None
    # a continuous call stopped before the sample ended (`until_groups`, partial rollouts):
    # a later call continues it from `token_ids`
    paused: bool = False


@dataclass(frozen=True)
class PoolSample:
    """One sample a continuous call decodes: new (no tokens) or paused by an earlier call.
    `routed_experts`: an MoE sample's record from that call (`Generation.routed_experts`:
    its last token was never fed, UNSET)."""

    prompt_index: int  # its prompt in the call; a call's samples of one prompt are a group
    sample: int = 0  # which of the prompt's samples
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[float, ...] = ()
    routed_experts: torch.Tensor | None = None


OnSample = Callable[[Generation], None]  # hears of each sample the moment it ends


class GenerationProgress:
    """Tokens generated so far, readable from another thread while `generate` runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.total = 0
        self.stop = threading.Event()  # set by another thread: end the running call early

    def reset(self, total: int) -> None:
        with self.lock:
            self.done, self.total = 0, total

    def add(self, n: int) -> None:
        with self.lock:
            self.done = min(self.total, self.done + n)

    def read(self) -> tuple[int, int]:
        with self.lock:
            return self.done, self.total

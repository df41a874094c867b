"""The `hf` inference strategy: batched transformers `generate` (the CPU fallback engine).

Prompts are token-id lists; each is sampled `n` times. Returns response token ids with the
EOS (or stop token) kept when the sample finished, and whether it finished before
`max_new_tokens`. `SamplingParams` and `Generation` are shared with the `vllm` engine.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from rollcli.data.padding import pad_left, position_ids_from_mask


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
    # log-prob of each sampled token under the sampling distribution (vllm engine only)
    logprobs: list[float] | None = None


class GenerationProgress:
    """Tokens generated so far, readable from another thread while `generate` runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = 0
        self.total = 0

    def reset(self, total: int) -> None:
        with self.lock:
            self.done, self.total = 0, total

    def add(self, n: int) -> None:
        with self.lock:
            self.done = min(self.total, self.done + n)

    def read(self) -> tuple[int, int]:
        with self.lock:
            return self.done, self.total


class HFInferEngine:
    def __init__(self, model: torch.nn.Module, eos_token_ids: list[int], pad_token_id: int) -> None:
        self.model = model
        self.eos = set(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.progress = GenerationProgress()

    @torch.no_grad()
    def generate(
        self, prompts: list[list[int]], params: SamplingParams, batch_size: int = 64
    ) -> list[Generation]:
        """`params.n` samples of every prompt, in prompt order (samples of a prompt adjacent).

        Each prompt is prefilled once and its KV cache shared by its `n` samples (prefix
        caching), which on a CPU saves most of the prefill cost of group sampling.
        """
        from transformers import StoppingCriteria, StoppingCriteriaList

        progress = self.progress
        n = params.n
        eos = self.eos | set(params.stop_token_ids)
        progress.reset(len(prompts) * n * params.max_new_tokens)

        class _Count(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
                progress.add(input_ids.shape[0])
                return torch.zeros(input_ids.shape[0], dtype=torch.bool)

        per_chunk = max(1, batch_size // n)
        out: list[Generation] = []
        for start in range(0, len(prompts), per_chunk):
            chunk = prompts[start : start + per_chunk]
            ids, mask = pad_left(chunk, self.pad_token_id)
            cache = self._prefill(ids, mask, n)
            torch.manual_seed(params.seed + start)
            sampling = params.temperature > 0
            result = self.model.generate(
                input_ids=ids.repeat_interleave(n, dim=0),
                attention_mask=mask.repeat_interleave(n, dim=0),
                past_key_values=cache,
                max_new_tokens=params.max_new_tokens,
                do_sample=sampling,
                temperature=params.temperature if sampling else None,
                top_p=params.top_p if sampling else None,
                top_k=(params.top_k or None) if sampling else None,
                pad_token_id=self.pad_token_id,
                eos_token_id=sorted(eos),
                stopping_criteria=StoppingCriteriaList([_Count()]),
            )
            rows = result[:, ids.shape[1] :].tolist()
            for j, row in enumerate(rows):
                out.append(_trim(start + j // n, row, params.max_new_tokens, eos))
        progress.reset(0)
        return out

    def _prefill(self, ids: torch.Tensor, mask: torch.Tensor, n: int):  # noqa: ANN202
        """KV cache of all but the last prompt token, computed once and repeated `n` times."""
        if ids.shape[1] < 2:
            return None
        out = self.model(
            input_ids=ids[:, :-1],
            attention_mask=mask[:, :-1],
            position_ids=position_ids_from_mask(mask)[:, :-1],
            use_cache=True,
        )
        cache = out.past_key_values
        if n > 1:
            cache.batch_repeat_interleave(n)
        return cache


def _trim(index: int, row: list[int], max_new: int, eos: set[int]) -> Generation:
    for pos, tok in enumerate(row):
        if tok in eos:
            return Generation(index, row[: pos + 1], True)
    return Generation(index, row, len(row) < max_new)

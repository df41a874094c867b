"""The `hf` inference strategy: batched transformers `generate` (the CPU fallback engine).

Prompts are token-id lists; each is sampled `n` times. Returns response token ids with the
EOS (or stop token) kept when the sample finished, whether it finished before
`max_new_tokens`, and the log-prob of each sampled token under the distribution it was
drawn from (after temperature, top-k and top-p). `SamplingParams` and `Generation` are
shared with the `vllm` engine.

Sampling uses only `SamplingParams`: the temperature / top-k / top-p warpers are built
here, so defaults in a model's `generation_config.json` (e.g. top_k 50) never leak in.
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
    # log-prob of each sampled token under the sampling distribution (the behaviour policy)
    logprobs: list[float] | None = None


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
        from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

        progress = self.progress
        n = params.n
        eos = self.eos | set(params.stop_token_ids)
        progress.reset(len(prompts) * n * params.max_new_tokens)

        class _Count(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001
                progress.add(input_ids.shape[0])
                stop = progress.stop.is_set()
                return torch.full(
                    (input_ids.shape[0],), stop, dtype=torch.bool, device=input_ids.device
                )

        device = next(self.model.parameters()).device
        per_chunk = max(1, batch_size // n)
        out: list[Generation] = []
        for start in range(0, len(prompts), per_chunk):
            chunk = prompts[start : start + per_chunk]
            ids, mask = pad_left(chunk, self.pad_token_id)
            ids, mask = ids.to(device), mask.to(device)  # the model's: CPU, or its GPU
            cache = self._prefill(ids, mask, n)
            torch.manual_seed(params.seed + start)
            sampling = params.temperature > 0
            recorder = SampledLogprobs()
            result = self.model.generate(
                input_ids=ids.repeat_interleave(n, dim=0),
                attention_mask=mask.repeat_interleave(n, dim=0),
                past_key_values=cache,
                max_new_tokens=params.max_new_tokens,
                do_sample=sampling,
                # neutral values switch transformers' own warpers off; ours run instead
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                logits_processor=LogitsProcessorList([*_warpers(params), recorder]),
                pad_token_id=self.pad_token_id,
                eos_token_id=sorted(eos),
                stopping_criteria=StoppingCriteriaList([_Count()]),
            )
            new = result[:, ids.shape[1] :]
            logprobs = recorder.finish(new[:, -1]).tolist()
            for j, row in enumerate(new.tolist()):
                gen = _trim(start + j // n, row, params.max_new_tokens, eos)
                gen.logprobs = logprobs[j][: len(gen.token_ids)]
                out.append(gen)
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


def _warpers(params: SamplingParams) -> list:
    """Temperature, then top-k, then top-p (vLLM's order); none when greedy."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    if params.temperature <= 0:
        return []
    warpers: list = []
    if params.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(params.temperature))
    if params.top_k > 0:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))
    return warpers


class SampledLogprobs:
    """A logits processor, last in the chain, that records the log-prob of each sampled
    token under the final (warped) distribution.

    The token drawn from step t's scores is only known at step t+1 (the last column of its
    `input_ids`), so one step's log-softmax is kept until then; `finish` takes the last
    step's tokens. Memory: one `[B, V]` tensor, whatever the length.
    """

    def __init__(self) -> None:
        self.previous: torch.Tensor | None = None
        self.values: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.previous is not None:
            self.values.append(self.previous.gather(1, input_ids[:, -1:]).squeeze(1))
        self.previous = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """`[B, steps]` log-probs, given the tokens sampled at the last step."""
        if self.previous is None:
            return torch.zeros(len(last_tokens), 0)
        self.values.append(self.previous.gather(1, last_tokens[:, None]).squeeze(1))
        return torch.stack(self.values, dim=1)


def _trim(index: int, row: list[int], max_new: int, eos: set[int]) -> Generation:
    for pos, tok in enumerate(row):
        if tok in eos:
            return Generation(index, row[: pos + 1], True)
    return Generation(index, row, len(row) < max_new)

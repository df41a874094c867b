"""The `hf` inference strategy: batched sampling with a transformers model's own forward
(the fallback engine; no extra package).

Prompts are token-id lists; each is sampled `n` times. Returns response token ids with the
EOS (or stop token) kept when the sample finished, whether it finished before
`max_new_tokens`, and the log-prob of each sampled token under the distribution it was
drawn from (after temperature, top-k and top-p). `SamplingParams` and `Generation` are
shared with the `vllm` engine.

Sampling uses only `SamplingParams`: the temperature / top-k / top-p warpers are built
here, so defaults in a model's `generation_config.json` (e.g. top_k 50) never leak in.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
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
    sample: int = 0  # which of the prompt's `n` samples this is


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


class HFInferEngine:
    """Batched sampling with the model's own forward: one prefill per prompt, then one
    decode step for all live samples at a time. A sample leaves the batch (and its KV cache
    rows are dropped) the step it ends, and `on_sample` hears of it then."""

    def __init__(self, model: torch.nn.Module, eos_token_ids: list[int], pad_token_id: int) -> None:
        self.model = model
        self.eos = set(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.progress = GenerationProgress()
        params = inspect.signature(model.forward).parameters
        # the prefill needs the logits of each prompt's last position only
        self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in params else {}

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        batch_size: int = 64,
        on_sample: OnSample | None = None,
    ) -> list[Generation]:
        """`params.n` samples of every prompt, in prompt order (samples of a prompt adjacent).

        Each prompt is prefilled once and its KV cache shared by its `n` samples (prefix
        caching), which on a CPU saves most of the prefill cost of group sampling. Prompts
        are decoded `batch_size // n` at a time. `on_sample(generation)` is called as each
        sample ends, in the order they end. Setting `progress.stop` ends the call at the
        next token: the samples so far are returned unfinished.
        """
        n = params.n
        eos = self.eos | set(params.stop_token_ids)
        self.progress.reset(len(prompts) * n * params.max_new_tokens)
        per_chunk = max(1, batch_size // n)
        out: list[Generation] = []
        try:
            for start in range(0, len(prompts), per_chunk):
                chunk = prompts[start : start + per_chunk]
                out += self._decode(chunk, start, params, eos, on_sample or (lambda g: None))
        finally:
            self.progress.reset(0)
        return out

    def _decode(
        self,
        prompts: list[list[int]],
        offset: int,
        params: SamplingParams,
        eos: set[int],
        on_sample: OnSample,
    ) -> list[Generation]:
        n = params.n
        gens = [
            Generation(offset + j // n, [], False, [], sample=j % n)
            for j in range(len(prompts) * n)
        ]
        if self.progress.stop.is_set():
            return gens
        device = next(self.model.parameters()).device
        ids, mask = pad_left(prompts, self.pad_token_id)
        ids, mask = ids.to(device), mask.to(device)  # the model's: CPU, or its GPU
        positions = position_ids_from_mask(mask)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            **self._last_logits,
        )
        cache = out.past_key_values
        if n > 1:
            cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1].repeat_interleave(n, dim=0)
        mask = mask.repeat_interleave(n, dim=0)
        next_position = positions[:, -1].repeat_interleave(n) + 1
        generator = torch.Generator(device=device).manual_seed(params.seed + offset)
        warpers = _warpers(params)  # none at temperature 1 without top-k / top-p
        sampling = params.temperature > 0
        alive = list(range(len(gens)))  # rows of the batch, as indices into `gens`
        for _ in range(params.max_new_tokens):
            scores = logits.float()
            for warp in warpers:
                scores = warp(None, scores)
            logprobs = torch.log_softmax(scores, dim=-1)
            if sampling:
                tokens = torch.multinomial(logprobs.exp(), 1, generator=generator).squeeze(1)
            else:  # greedy
                tokens = scores.argmax(dim=-1)
            picked = logprobs.gather(1, tokens[:, None]).squeeze(1)
            self.progress.add(len(alive))
            stop = self.progress.stop.is_set()
            keep = []
            sampled = zip(alive, tokens.tolist(), picked.tolist(), strict=True)
            for row, (j, tok, lp) in enumerate(sampled):
                gen = gens[j]
                gen.token_ids.append(tok)
                gen.logprobs.append(lp)
                if tok in eos:
                    gen.finished = True
                    on_sample(gen)
                elif len(gen.token_ids) == params.max_new_tokens or stop:
                    on_sample(gen)
                else:
                    keep.append(row)
            if not keep:
                break
            if len(keep) < len(alive):  # drop the ended samples from the batch and cache
                rows = torch.tensor(keep, device=device)
                cache.batch_select_indices(rows)
                mask, next_position, tokens = mask[rows], next_position[rows], tokens[rows]
                alive = [alive[row] for row in keep]
            mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=1)
            out = self.model(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=next_position[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1]
            next_position = next_position + 1
        return gens


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

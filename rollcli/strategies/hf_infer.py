"""The `hf` inference strategy: batched sampling with a transformers model's own forward
(the fallback engine; no extra package).

Prompts are token-id lists; each is sampled `n` times. Returns response token ids with the
EOS (or stop token) kept when the sample finished, whether it finished before
`max_new_tokens`, and the log-prob of each sampled token under the temperature-only
distribution `softmax(logits / T)`: the one the trainer computes (`response_logprobs` at
the run's temperature), so truncated importance weights compare like with like. Top-k and
top-p only decide which tokens can be drawn; the log-prob under the truncated,
renormalised distribution would be higher by `-log(kept mass)` on every token, a bias of
the weights `pi_old / mu` below 1 (a mean of 0.906 at top_p 0.9 with the same weights).
`SamplingParams`, `Generation` and the rest every engine shares: strategies/sampling.py.

Multi-turn callers name a session per prompt (one per episode): the engine keeps each
session's KV across calls and prefills only the tokens a prompt adds to it (see
hf_turn_cache.py); `drop_sessions` on every weight update.

Sampling uses only `SamplingParams`: the temperature / top-k / top-p warpers are built
here, so defaults in a model's `generation_config.json` (e.g. top_k 50) never leak in.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from rollcli.planning.inference_memory import HF_DECODE_BATCH
from rollcli.strategies.hf_gqa_attention import use_gqa_attention
from rollcli.strategies.hf_prefill import prefill, prefill_sessions
from rollcli.strategies.hf_turn_cache import Session, TurnCache
from rollcli.strategies.host_memory import release_free_memory
from rollcli.strategies.int8_linears import Int8Linears
from rollcli.strategies.lm_head import plain_head
from rollcli.strategies.sampling import Generation, GenerationProgress, OnSample, SamplingParams


class HFInferEngine:
    """Batched sampling with the model's own forward: one prefill per prompt, then one
    decode step for all live samples at a time. A sample leaves the batch (and its KV cache
    rows are dropped) the step it ends, and `on_sample` hears of it then."""

    def __init__(
        self,
        model: torch.nn.Module,
        eos_token_ids: list[int],
        pad_token_id: int,
        session_mib: float = 0.0,
        int8: bool = False,
    ) -> None:
        """`session_mib`: memory for the sessions' KV (0: sessions are refused). `int8`:
        every linear computes with an int8 copy of its weight (`rollout.precision: int8`,
        CPU only; int8_linears.py), re-packed by `requantize` after each weight sync."""
        self.model = model
        self.eos = set(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.progress = GenerationProgress()
        params = inspect.signature(model.forward).parameters
        # the prefill needs the logits of each prompt's last position only
        self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self.sessions = TurnCache(session_mib) if session_mib > 0 else None
        use_gqa_attention(model)  # on CPU: no copies of the grouped key/value heads
        # On CPU a decode step's head is `W @ h^T` (see `_decode_logits`)
        head = plain_head(model)
        self._on_cpu = next(model.parameters()).device.type == "cpu"
        self._head = head if self._on_cpu and type(head) is torch.nn.Linear else None
        self.int8 = Int8Linears(model) if int8 else None

    def requantize(self) -> None:
        """Re-pack the int8 copies from the model's (just synced) weights; nothing without."""
        if self.int8 is not None:
            self.int8.quantize()

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        batch_size: int = HF_DECODE_BATCH,
        on_sample: OnSample | None = None,
        sessions: list[str] | None = None,
    ) -> list[Generation]:
        """`params.n` samples of every prompt, in prompt order (samples of a prompt adjacent).

        Each prompt is prefilled once and its KV cache shared by its `n` samples (prefix
        caching), which on a CPU saves most of the prefill cost of group sampling. Prompts
        are decoded `batch_size // n` at a time. `on_sample(generation)` is called as each
        sample ends, in the order they end. Setting `progress.stop` ends the call at the
        next token: the samples so far are returned unfinished.

        `sessions[i]` names prompt `i`'s session (one sample per prompt): the prompt reuses
        the KV its session holds and the session then holds the prompt and the reply.
        """
        n = params.n
        if sessions is not None:
            if self.sessions is None:
                raise ValueError("this hf engine keeps no sessions: build it with session_mib > 0")
            if n != 1 or len(sessions) != len(prompts):
                raise ValueError("sessions need one sample per prompt and one session per prompt")
        eos = self.eos | set(params.stop_token_ids)
        self.progress.reset(len(prompts) * n * params.max_new_tokens)
        per_chunk = max(1, batch_size // n)
        out: list[Generation] = []
        try:
            for start in range(0, len(prompts), per_chunk):
                chunk = prompts[start : start + per_chunk]
                names = sessions[start : start + per_chunk] if sessions else None
                out += self._decode(chunk, start, params, eos, on_sample or (lambda g: None), names)
            if self.int8 is not None and not self.int8.smoothed:  # the inputs seen smooth it
                self.int8.quantize()
        finally:
            self.progress.reset(0)
            if self._on_cpu:  # the call's KV buffers leave the process (host_memory.py)
                release_free_memory()
        return out

    def _decode(
        self,
        prompts: list[list[int]],
        offset: int,
        params: SamplingParams,
        eos: set[int],
        on_sample: OnSample,
        sessions: list[str] | None = None,
    ) -> list[Generation]:
        from rollcli.strategies.hf_kv_buffer import to_buffers

        n = params.n
        reuse: list[tuple[Session | None, int]] = [(None, 0)] * len(prompts)
        if sessions is not None:
            reuse = [self.sessions.reusable(s, p) for s, p in zip(sessions, prompts, strict=True)]
        gens = [
            Generation(offset + j // n, [], False, [], j % n, cached_tokens=reuse[j // n][1])
            for j in range(len(prompts) * n)
        ]
        if self.progress.stop.is_set():
            return gens
        device = next(self.model.parameters()).device
        if any(n for _, n in reuse):  # the prefill and the decode write into one buffer
            done = prefill_sessions(
                self.model,
                prompts,
                reuse,
                self.pad_token_id,
                params.max_new_tokens,
                **self._last_logits,
            )
        else:
            done = prefill(self.model, prompts, self.pad_token_id, **self._last_logits)
        cache = done.cache
        if n > 1:
            cache.batch_repeat_interleave(n)
        to_buffers(cache, done.mask.shape[1] + params.max_new_tokens)  # decode writes in place
        logits = done.logits.repeat_interleave(n, dim=0)
        mask = done.mask.repeat_interleave(n, dim=0)
        next_position = done.next_position.repeat_interleave(n)
        generator = torch.Generator(device=device).manual_seed(params.seed + offset)
        warpers = _warpers(params)  # none at temperature 1 without top-k / top-p
        temperature = params.temperature if params.temperature > 0 else 1.0
        sampling = params.temperature > 0
        # rows of the batch, as indices into `gens` (sessions: n = 1, rows in `done.order`)
        alive = done.order if n == 1 else list(range(len(gens)))
        for _ in range(params.max_new_tokens):
            tokens, picked = _sample(logits, warpers, generator if sampling else None, temperature)
            self.progress.add(len(alive))
            stop = self.progress.stop.is_set()
            keep = []
            sampled = zip(alive, tokens.tolist(), picked.tolist(), strict=True)
            for row, (j, tok, lp) in enumerate(sampled):
                gen = gens[j]
                gen.token_ids.append(tok)
                gen.logprobs.append(lp)
                if tok not in eos and len(gen.token_ids) < params.max_new_tokens and not stop:
                    keep.append(row)
                    continue
                gen.finished = tok in eos
                if sessions is not None:  # before its rows leave the cache
                    ids = prompts[j] + gen.token_ids[:-1]  # the last token was never fed
                    self._keep_session(sessions[j], ids, cache, mask, row)
                on_sample(gen)
            if not keep:
                break
            if len(keep) < len(alive):  # drop the ended samples from the batch and cache
                rows = torch.tensor(keep, device=device)
                cache.batch_select_indices(rows)
                mask, next_position, tokens = mask[rows], next_position[rows], tokens[rows]
                alive = [alive[row] for row in keep]
            mask = torch.cat([mask, mask.new_ones(len(alive), 1)], dim=1)
            logits = self._decode_logits(
                input_ids=tokens[:, None],
                attention_mask=mask,
                position_ids=next_position[:, None],
                past_key_values=cache,
                use_cache=True,
            )
            next_position = next_position + 1
        return gens

    def _decode_logits(self, **inputs: Any) -> torch.Tensor:
        """`[B, V]` logits of a decode step's one new position per row. A plain CPU head is
        applied as `(W @ h^T)^T` rather than `h @ W^T`: with a few rows and a 49,152-row `W`
        MKL runs that layout 1.2-1.7x faster (smollm2-135m, 2 cores: 38 vs 56 ms with the
        sampling at 64 rows, 9.5 vs 16.6 ms at 8)."""
        if self._head is None:
            return self.model(**inputs).logits[:, -1]
        hidden = self.model.get_decoder()(**inputs).last_hidden_state[:, -1]
        if self.int8 is not None:  # the head's int8 copy
            return self._head(hidden)
        logits = torch.mm(self._head.weight, hidden.t()).t().contiguous()
        return logits if self._head.bias is None else logits.add_(self._head.bias)

    def _keep_session(
        self,
        session_id: str,
        ids: list[int],
        cache: Any,
        mask: torch.Tensor,
        row: int,
    ) -> None:
        """Row `row` of the running cache (its unpadded positions) becomes the session."""
        real = mask[row].bool()
        layers = [(layer.keys[row][:, real], layer.values[row][:, real]) for layer in cache.layers]
        if any(k.shape[1] != len(ids) for k, _ in layers):  # a sliding-window layer: not kept
            return
        self.sessions.store(session_id, Session(ids, layers))

    def end_sessions(self, session_ids: list[str]) -> None:
        """Free the sessions of episodes that ended."""
        if self.sessions is not None:
            self.sessions.end(session_ids)

    def drop_sessions(self) -> None:
        """Forget every session: their KV came from weights that just changed."""
        if self.sessions is not None:
            self.sessions.clear()


def _sample(
    logits: torch.Tensor,
    warpers: list,
    generator: torch.Generator | None,
    temperature: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row, drawn from the warped distribution (greedy without a
    `generator`), and its log-prob under `softmax(logits / temperature)`:

        log mu(y) = logits_y / T - logsumexp(logits / T)

    not under the top-k / top-p truncated one the token was drawn from (see the module
    docstring).

    Sampling inverts the CDF with one uniform per row (float64, so even the tail's
    probabilities are kept): the same categorical distribution as `torch.multinomial`, which
    draws an exponential per vocabulary entry (at batch 64 that cost more than the LM head's
    softmax). No full log-softmax is materialised: log p = score - max - log(sum exp).
    """
    scores = logits.float()
    for warp in warpers:
        scores = warp(None, scores)
    top = scores.amax(dim=-1, keepdim=True)
    weights = (scores - top).exp_()  # 0 where a warper masked the score to -inf
    tempered = logits.float() / temperature if temperature != 1.0 else logits.float()
    if not torch.isneginf(scores).any():  # no truncation: scores are the tempered logits
        tempered, tempered_top, tempered_weights = scores, top, weights
    else:
        tempered_top = tempered.amax(dim=-1, keepdim=True)
        tempered_weights = (tempered - tempered_top).exp_()
    if generator is None:
        tokens = scores.argmax(dim=-1)
    else:
        cdf = weights.double().cumsum_(dim=-1)
        total = cdf[:, -1:]
        u = torch.rand(total.shape, dtype=total.dtype, device=total.device, generator=generator)
        u = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
        tokens = torch.searchsorted(cdf, u, right=True).squeeze(1)  # first cdf > u: p > 0
    log_total = tempered_weights.sum(dim=-1, keepdim=True).log()
    picked = tempered.gather(1, tokens[:, None]) - tempered_top - log_total
    return tokens, picked.squeeze(1)


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

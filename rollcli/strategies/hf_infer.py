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
from collections.abc import Callable
from typing import Any

import torch

from rollcli.models.moe_routing import recorded_routing, recording
from rollcli.planning.inference_memory import HF_DECODE_BATCH
from rollcli.strategies.bf16_linears import Bf16Linears
from rollcli.strategies.hf_continuous import ContinuousDecode
from rollcli.strategies.hf_decode_routes import DecodeRoutes, static_choice
from rollcli.strategies.hf_gqa_attention import use_folded_decode_attention, use_gqa_attention
from rollcli.strategies.hf_prefill import prefill, prefill_sessions
from rollcli.strategies.hf_sampling import sampler
from rollcli.strategies.hf_turn_cache import Session, TurnCache
from rollcli.strategies.host_memory import release_free_memory
from rollcli.strategies.int8_linears import Int8Linears
from rollcli.strategies.lm_head import plain_head
from rollcli.strategies.sampling import (
    Generation,
    GenerationProgress,
    OnSample,
    PoolSample,
    SamplingParams,
)


class HFInferEngine:
    """Batched sampling with the model's own forward: one prefill per prompt, then one
    decode step for all live samples at a time. A sample leaves the batch (and its KV cache
    rows are dropped) the step it ends, and `on_sample` hears of it then. On a CUDA device
    the decode runs over a static KV cache instead, each step one CUDA graph, the ended
    samples staying in the batch unread (hf_static_decode.py: per-step overhead bound the
    dynamic decode there)."""

    def __init__(
        self,
        model: torch.nn.Module,
        eos_token_ids: list[int],
        pad_token_id: int,
        session_mib: float = 0.0,
        int8: bool = False,
        decode_batch: int = HF_DECODE_BATCH,
        static_decode: bool | None = None,
        bf16: bool = False,
        continuous: bool = False,
    ) -> None:
        """`session_mib`: memory for the sessions' KV (0: sessions are refused). `int8`:
        every linear computes with an int8 copy of its weight (`rollout.precision: int8`,
        CPU only; int8_linears.py), re-packed by `requantize` after each weight sync; `bf16`:
        a bf16 copy instead (`rollout.precision: bf16` on a CPU, bf16_linears.py), re-cast.
        `decode_batch`: the samples decoded at a time (`generate`'s default `batch_size`;
        the plan's `max_num_seqs` on GPUs). `static_decode`: decode calls without sessions
        use a static KV cache, replayed as CUDA graphs on a GPU (hf_static_decode.py);
        None: on a CUDA device where the model suits it, True: forced (refused where the
        model does not suit it), False: never. `continuous`: `generate` decodes with
        continuous batching (rows refilled as samples end, hf_continuous.py)."""
        self.model = model
        self.decode_batch = decode_batch
        self.continuous = continuous
        self.eos = set(eos_token_ids)
        self.pad_token_id = pad_token_id
        self.progress = GenerationProgress()
        # the last call's (rows that sampled a token, row slots) over its decode steps
        self.occupancy = (0, 0)
        params = inspect.signature(model.forward).parameters
        # the prefill needs the logits of each prompt's last position only
        self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self.sessions = TurnCache(session_mib) if session_mib > 0 else None
        use_gqa_attention(model)  # on CPU: no copies of the grouped key/value heads
        # On CPU a decode step's head is `W @ h^T` (see `_decode_logits`)
        head = plain_head(model)
        self._on_cpu = next(model.parameters()).device.type == "cpu"
        self._head = head if self._on_cpu and type(head) is torch.nn.Linear else None
        if int8 and bf16:
            raise ValueError("an hf engine computes its linears in int8 or in bf16, not both")
        self.int8 = Int8Linears(model) if int8 else None
        self.bf16 = Bf16Linears(model) if bf16 else None
        # an MoE model's forwards record the experts they pick (R3's record): every
        # sample brings back its tokens' (`Generation.routed_experts`)
        self.routing = recording(model)
        self.static, self.static_refusal = static_choice(model, static_decode)
        self.cuda_graphs = self.static and not self._on_cpu
        if self.cuda_graphs:  # a decode step's grouped heads read in place (not copied)
            use_folded_decode_attention(model)

    def requantize(self) -> None:
        """Re-pack the int8 (or bf16) copies from the model's (just synced) weights; nothing
        without."""
        for copies in (self.int8, self.bf16):
            if copies is not None:
                copies.quantize()

    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        batch_size: int | None = None,
        on_sample: OnSample | None = None,
        sessions: list[str] | None = None,
        continuous: bool | None = None,
    ) -> list[Generation]:
        """`params.n` samples of every prompt, in prompt order (samples of a prompt adjacent).

        Each prompt is prefilled once and its KV cache shared by its `n` samples (prefix
        caching), which on a CPU saves most of the prefill cost of group sampling. Prompts
        are decoded `batch_size // n` at a time (`batch_size` None: the engine's
        `decode_batch`). `on_sample(generation)` is called as each
        sample ends, in the order they end. Setting `progress.stop` ends the call at the
        next token: the samples so far are returned unfinished.

        `sessions[i]` names prompt `i`'s session (one sample per prompt): the prompt reuses
        the KV its session holds and the session then holds the prompt and the reply.

        `continuous` (None: the engine's): `batch_size` rows decode at a time and each is refilled the step its
        sample ends (`generate_pool`), instead of chunks that wait for their longest sample.
        """
        n = params.n
        if (self.continuous if continuous is None else continuous) and sessions is None:
            work = [PoolSample(i, s) for i in range(len(prompts)) for s in range(n)]
            return self.generate_pool(prompts, work, params, None, on_sample, batch_size)
        if sessions is not None:
            if self.sessions is None:
                raise ValueError("this hf engine keeps no sessions: build it with session_mib > 0")
            if n != 1 or len(sessions) != len(prompts):
                raise ValueError("sessions need one sample per prompt and one session per prompt")
        eos = self.eos | set(params.stop_token_ids)
        self.progress.reset(len(prompts) * n * params.max_new_tokens)
        self.occupancy = (0, 0)
        per_chunk = max(1, (batch_size or self.decode_batch) // n)
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

    @torch.no_grad()
    def generate_pool(
        self,
        prompts: list[list[int]],
        work: list[PoolSample],
        params: SamplingParams,
        until_groups: int | None = None,
        on_sample: OnSample | None = None,
        batch_size: int | None = None,
    ) -> list[Generation]:
        """The samples of `work` (new, or paused by an earlier call: they continue from
        their tokens), in its order, decoded with continuous batching over `batch_size` rows
        (None: `decode_batch`), refilled in `work`'s order (hf_continuous.py); `params.n` is
        not read. `until_groups`: stop once that many prompts' samples in `work` have all
        ended; the rest come back `paused`."""
        eos = self.eos | set(params.stop_token_ids)
        budget = sum(params.max_new_tokens - len(w.token_ids) for w in work)
        self.progress.reset(budget)
        try:
            call = ContinuousDecode(
                self,
                prompts,
                work,
                params,
                batch_size or self.decode_batch,
                eos,
                on_sample or (lambda g: None),
                until_groups,
            )
            gens = call.run()
            self.occupancy = call.occupancy
        finally:
            self.progress.reset(0)
            if self._on_cpu:
                release_free_memory()
        return gens

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
            done = prefill(
                self.model, prompts, self.pad_token_id, params.max_new_tokens, **self._last_logits
            )
        if self.static and sessions is None:
            return self._decode_static(done, gens, params, eos, on_sample, offset)
        cache = done.cache
        if n > 1:
            cache.batch_repeat_interleave(n)
        to_buffers(cache, done.mask.shape[1] + params.max_new_tokens)  # decode writes in place
        logits = done.logits.repeat_interleave(n, dim=0)
        mask = done.mask.repeat_interleave(n, dim=0)
        next_position = done.next_position.repeat_interleave(n)
        draw = sampler(params, offset, device)
        # rows of the batch, as indices into `gens` (sessions: n = 1, rows in `done.order`)
        alive = done.order if n == 1 else list(range(len(gens)))
        routes = DecodeRoutes(done.routing, n, len(gens))

        def ended(row: int, gen: Generation) -> None:
            routes.close(alive[row], gen)
            if sessions is not None:  # before its rows leave the cache
                j = alive[row]
                ids = prompts[j] + gen.token_ids[:-1]  # the last token was never fed
                self._keep_session(sessions[j], ids, cache, mask, row, routes.fed(j))
            on_sample(gen)

        for _ in range(params.max_new_tokens):
            tokens, picked = draw(logits)
            self._occupied(len(alive), len(gens))
            keep = self._record(gens, alive, tokens, picked, params.max_new_tokens, eos, ended)
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
            routes.step(alive, recorded_routing(self.model, tuple(tokens[:, None].shape)))
            next_position = next_position + 1
        return gens

    def _decode_static(
        self,
        done: Any,
        gens: list[Generation],
        params: SamplingParams,
        eos: set[int],
        on_sample: OnSample,
        offset: int,
    ) -> list[Generation]:
        """`_decode`'s loop over a static cache (hf_static_decode.py): ended samples stay in
        the batch unread, and only the live rows' logits are sampled (the same draws)."""
        from rollcli.strategies.hf_static_decode import StaticDecode

        n = params.n
        state = StaticDecode(
            self.model, done, n, params.max_new_tokens, self._decode_logits, self.cuda_graphs
        )
        done.cache = None  # the prefill's KV now lives in the static cache
        logits = done.logits.repeat_interleave(n, dim=0)
        draw = sampler(params, offset, logits.device)
        alive = list(range(len(gens)))  # rows of the static batch are indices into `gens`
        live = None  # the live rows' indices, None while every row is live
        for _ in range(params.max_new_tokens):
            tokens, picked = draw(logits)
            self._occupied(len(alive), len(gens))
            keep = self._record(
                gens, alive, tokens, picked, params.max_new_tokens, eos, lambda _, g: on_sample(g)
            )
            if not keep:
                break
            if len(keep) < len(alive):
                tokens = tokens[torch.tensor(keep, device=tokens.device)]
                alive = [alive[row] for row in keep]
                live = torch.tensor(alive, device=tokens.device)
            logits = state.step(tokens, live)
            if live is not None:
                logits = logits.index_select(0, live)
        return gens

    def _occupied(self, busy: int, slots: int) -> None:
        self.occupancy = (self.occupancy[0] + busy, self.occupancy[1] + slots)

    def _record(
        self,
        gens: list[Generation],
        alive: list[int],
        tokens: torch.Tensor,
        picked: torch.Tensor,
        limit: int,
        eos: set[int],
        ended: Callable[[int, Generation], None],
    ) -> list[int]:
        """Append each live row's token and log-prob to its sample; `ended(row, gen)` for
        each sample that ends (EOS or a stop token, `limit` tokens, `progress.stop`).
        Returns the rows that go on."""
        self.progress.add(len(alive))
        stop = self.progress.stop.is_set()
        keep = []
        sampled = zip(alive, tokens.tolist(), picked.tolist(), strict=True)
        for row, (j, tok, lp) in enumerate(sampled):
            gen = gens[j]
            gen.token_ids.append(tok)
            gen.logprobs.append(lp)
            if tok not in eos and len(gen.token_ids) < limit and not stop:
                keep.append(row)
                continue
            gen.finished = tok in eos
            ended(row, gen)
        return keep

    def _decode_logits(self, **inputs: Any) -> torch.Tensor:
        """`[B, V]` logits of a decode step's one new position per row. A plain CPU head is
        applied as `(W @ h^T)^T` rather than `h @ W^T`: with a few rows and a 49,152-row `W`
        MKL runs that layout 1.2-1.7x faster (smollm2-135m, 2 cores: 38 vs 56 ms with the
        sampling at 64 rows, 9.5 vs 16.6 ms at 8)."""
        if self._head is None:
            return self.model(**inputs).logits[:, -1]
        hidden = self.model.get_decoder()(**inputs).last_hidden_state[:, -1]
        if self.int8 is not None or self.bf16 is not None:  # the head's int8 / bf16 copy
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
        routing: torch.Tensor | None = None,
    ) -> None:
        """Row `row` of the running cache (its unpadded positions) becomes the session, with
        the experts an MoE model chose at its tokens (`routing`)."""
        real = mask[row].bool()
        layers = [(layer.keys[row][:, real], layer.values[row][:, real]) for layer in cache.layers]
        if any(k.shape[1] != len(ids) for k, _ in layers):  # a sliding-window layer: not kept
            return
        self.sessions.store(session_id, Session(ids, layers, routing))

    def end_sessions(self, session_ids: list[str]) -> None:
        """Free the sessions of episodes that ended."""
        if self.sessions is not None:
            self.sessions.end(session_ids)

    def drop_sessions(self) -> None:
        """Forget every session: their KV came from weights that just changed."""
        if self.sessions is not None:
            self.sessions.clear()

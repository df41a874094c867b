"""The hf engine's continuous batching: a fixed number of decode rows, each refilled the
step its sample ends, from the call's queue (paused samples first, then new ones, as the
caller orders them), so decode steps run full while work waits. Without it a batch decodes
emptier and emptier until its longest sample ends (`hf_infer.HFInferEngine._decode`).

A call may stop once `until_groups` groups (a prompt's samples in the call) have ended:
partial rollouts (`rollout.partial`). The samples still decoding and those never started
come back `paused`, with the tokens and log-probs they have; a later call continues them
from those token ids (never re-tokenised), prefilling the prompt and the tokens so far.

The stop is a function of decode steps (the step the `until_groups`-th group ends), never of
wall-clock time, and a call draws from one generator seeded by `params.seed`, one uniform
per row per step in row order: the same call samples the same tokens.

Rows share one time axis: a joining row's KV is right-aligned to the columns written so
far (left padding, masked), and columns every row pads are trimmed when the buffer fills.
An MoE model's record of a continued sample keeps the experts each earlier token was fed
with when it was decoded (the routing behind its behaviour log-prob), not the re-prefill's.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

import torch
from transformers.cache_utils import DynamicLayer

from rollcli.models.moe_routing import recorded_routing, unset_like
from rollcli.strategies.hf_kv_buffer import BufferLayer, session_cache
from rollcli.strategies.hf_prefill import prefill
from rollcli.strategies.hf_sampling import sampler
from rollcli.strategies.sampling import Generation, OnSample, PoolSample, SamplingParams

if TYPE_CHECKING:
    from rollcli.strategies.hf_infer import HFInferEngine

GROW = 64  # columns added when the buffer is full and nothing can be trimmed


class ContinuousDecode:
    """One call of `HFInferEngine.generate_pool`."""

    def __init__(
        self,
        engine: HFInferEngine,
        prompts: list[list[int]],
        work: list[PoolSample],
        params: SamplingParams,
        rows: int,
        eos: set[int],
        on_sample: OnSample,
        until_groups: int | None = None,
    ) -> None:
        self.engine, self.model = engine, engine.model
        self.prompts, self.work, self.params = prompts, work, params
        self.rows = max(1, min(rows, len(work)))  # no more rows than samples
        self.eos, self.on_sample = eos, on_sample
        self.until = until_groups
        self.device = next(self.model.parameters()).device
        self.gens = [
            Generation(
                w.prompt_index,
                list(w.token_ids),
                False,
                list(w.logprobs),
                w.sample,
                routed_experts=w.routed_experts,
            )
            for w in work
        ]
        self.left = Counter(w.prompt_index for w in work)  # samples of a group not ended
        self.groups_ended = 0
        self.queue = deque(range(len(work)))
        self.alive: list[int] = []  # row -> index into `work`
        self.fed: dict[int, list[torch.Tensor]] = {}  # MoE: experts at each fed position
        self.keys: list[torch.Tensor] = []  # per layer [rows, kv_heads, capacity, head_dim]
        self.values: list[torch.Tensor] = []
        self.mask = torch.zeros(0, 0, dtype=torch.long, device=self.device)
        self.width = 0  # columns written (every row: left padding, then its positions)
        self.next_position = torch.zeros(0, dtype=torch.long, device=self.device)
        self.logits: torch.Tensor | None = None
        self.steps = self.busy = 0  # decode steps, rows that sampled a token in them

    @property
    def occupancy(self) -> tuple[int, int]:
        """(rows that sampled a token, row slots) over the call's decode steps."""
        return self.busy, self.steps * self.rows

    # ---- the loop ------------------------------------------------------------------------
    def run(self) -> list[Generation]:
        draw = sampler(self.params, 0, self.device)
        limit = self.params.max_new_tokens
        stop = self.engine.progress.stop
        self._admit()
        while self.alive and not stop.is_set():
            tokens, picked = draw(self.logits)
            self.steps += 1
            self.busy += len(self.alive)
            self.engine.progress.add(len(self.alive))
            keep: list[int] = []
            for row, (j, tok, lp) in enumerate(
                zip(self.alive, tokens.tolist(), picked.tolist(), strict=True)
            ):
                gen = self.gens[j]
                gen.token_ids.append(tok)
                gen.logprobs.append(lp)
                if tok not in self.eos and len(gen.token_ids) < limit:
                    keep.append(row)
                    continue
                gen.finished = tok in self.eos
                self._close(j)
                self.on_sample(gen)
                self.left[gen.prompt_index] -= 1
                self.groups_ended += self.left[gen.prompt_index] == 0
            if self.until is not None and self.groups_ended >= self.until:
                self._select(keep, tokens)
                break
            tokens = self._select(keep, tokens)
            if self.alive:
                self._step(tokens)
            self._admit()
        for j in [*self.alive, *self.queue]:  # stopped: what is left is paused
            self.gens[j].paused = True
            if j in self.fed:
                self._close(j)
        return self.gens

    def _select(self, keep: list[int], tokens: torch.Tensor) -> torch.Tensor:
        """Keep rows `keep` (in order) at the top of the batch; their tokens."""
        if len(keep) == len(self.alive):
            return tokens
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        n, w = len(keep), self.width
        for buffer in (*self.keys, *self.values):
            buffer[:n, :, :w] = buffer[index, :, :w]
        self.mask[:n, :w] = self.mask[index, :w]
        self.next_position = self.next_position[index]
        self.logits = self.logits[index] if self.logits is not None else None
        self.alive = [self.alive[row] for row in keep]
        return tokens[index]

    def _step(self, tokens: torch.Tensor) -> None:
        """One decode forward of every row on its last sampled token."""
        n = len(self.alive)
        if self.width + 1 > self.mask.shape[1]:
            self._reframe()
        cache = session_cache(
            [(k[:n], v[:n]) for k, v in zip(self.keys, self.values, strict=True)], self.width
        )
        self.mask[:n, self.width] = 1
        self.logits = self.engine._decode_logits(
            input_ids=tokens[:, None],
            attention_mask=self.mask[:n, : self.width + 1],
            position_ids=self.next_position[:, None],
            past_key_values=cache,
            use_cache=True,
        )
        recorded = recorded_routing(self.model, (n, 1))
        if recorded is not None:
            for row, j in enumerate(self.alive):
                self.fed[j].append(recorded[row, 0][None])
        self.width += 1
        self.next_position = self.next_position + 1

    # ---- rows joining ----------------------------------------------------------------
    def _admit(self) -> None:
        """Fill the free rows from the queue: one prefill of the joiners' prompts and tokens
        so far (identical ones computed once), right-aligned to the batch's columns."""
        free = self.rows - len(self.alive)
        joiners = [self.queue.popleft() for _ in range(min(free, len(self.queue)))]
        if not joiners:
            return
        seqs = [
            self.prompts[self.work[j].prompt_index] + list(self.gens[j].token_ids) for j in joiners
        ]
        done = prefill(self.model, seqs, self.engine.pad_token_id, 0, **self.engine._last_logits)
        layers = []
        for layer in done.cache.layers:
            if type(layer) not in (DynamicLayer, BufferLayer):
                raise ValueError(
                    "continuous batching needs full-attention KV layers (this model has "
                    f"{type(layer).__name__}); set rollout.continuous_batching: false"
                )
            layers.append((layer.keys, layer.values))
        span = done.mask.shape[1]
        if not self.keys:
            self._allocate(layers, span)
        elif span > self.width:
            self._reframe(span)
        else:
            self._trim()
        start = len(self.alive)
        w = self.width
        for r, i in enumerate(done.order):
            row = start + r
            for (kb, vb), (k, v) in zip(
                zip(self.keys, self.values, strict=True), layers, strict=True
            ):
                kb[row, :, : w - span] = 0
                vb[row, :, : w - span] = 0
                kb[row, :, w - span : w] = k[i]
                vb[row, :, w - span : w] = v[i]
            self.mask[row, :w] = 0
            self.mask[row, w - span : w] = done.mask[i]
        order = torch.tensor(done.order, dtype=torch.long, device=self.device)
        positions = done.next_position[order]
        logits = done.logits[order]
        self.next_position = torch.cat([self.next_position, positions])
        self.logits = logits if self.logits is None else torch.cat([self.logits, logits])
        joined = [joiners[i] for i in done.order]
        if done.routing is not None:
            for i, j in zip(done.order, joined, strict=True):
                self.fed[j] = [self._fed_before(j, done.routing[i])]
        self.alive += joined

    def _fed_before(self, j: int, prefilled: torch.Tensor) -> torch.Tensor:
        """Sample j's experts at its prompt and tokens: the record it was decoded with where
        it has one (a paused sample), the prefill's for the rest (its last token, fed now)."""
        before = self.work[j].routed_experts
        if before is None:
            return prefilled
        kept = before[:-1]  # its last token was never fed
        return torch.cat([kept, prefilled[len(kept) :]])

    def _close(self, j: int) -> None:
        """Sample j's record: every fed position, then UNSET for its last token."""
        parts = self.fed.pop(j, None)
        if parts is not None:
            fed = torch.cat(parts)
            self.gens[j].routed_experts = torch.cat([fed, unset_like(fed, 1)])

    # ---- the buffer ------------------------------------------------------------------
    def _allocate(self, layers: list[tuple[torch.Tensor, torch.Tensor]], span: int) -> None:
        capacity = span + min(self.params.max_new_tokens, GROW) + 1
        for k, _ in layers:
            shape = (self.rows, k.shape[1], capacity, k.shape[3])
            self.keys.append(k.new_zeros(shape))
            self.values.append(k.new_zeros(shape))
        self.mask = torch.zeros(self.rows, capacity, dtype=torch.long, device=self.device)
        self.width = span

    def _dead(self) -> int:
        """Leading columns that every live row pads."""
        n = len(self.alive)
        if not n:
            return self.width
        return int((self.mask[:n, : self.width].sum(dim=1)).neg().add(self.width).min())

    def _trim(self) -> None:
        """Drop the columns every row pads once they are a buffer's growth's worth."""
        if self._dead() >= GROW:
            self._reframe()

    def _reframe(self, min_width: int = 0) -> None:
        """New buffers: the padding every live row shares dropped, left padding added up to
        `min_width` columns (a longer joiner), room for `GROW` more decode steps."""
        n, dead = len(self.alive), self._dead()
        kept = self.width - dead
        width = max(kept, min_width)
        pad = width - kept
        capacity = max(self.mask.shape[1], width + GROW + 1)
        for buffers in (self.keys, self.values):
            for i, old in enumerate(buffers):
                new = old.new_zeros(old.shape[0], old.shape[1], capacity, old.shape[3])
                new[:n, :, pad:width] = old[:n, :, dead : self.width]
                buffers[i] = new
        mask = torch.zeros(self.rows, capacity, dtype=torch.long, device=self.device)
        mask[:n, pad:width] = self.mask[:n, dead : self.width]
        self.mask, self.width = mask, width

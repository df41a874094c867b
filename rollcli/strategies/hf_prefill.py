"""The hf engine's prefill: one forward over a batch of prompts into a KV cache that the
decode then writes in place (`hf_kv_buffer`).

Multi-turn batches (`prefill_sessions`): prompts reuse the KV their episode's session holds
(`hf_turn_cache`). Every row is right-aligned to the batch's longest prompt in one buffer
with room for the reply, the sessions' KV is copied into it once, and each forward appends
in place, so the batch's KV exists once, as wide as its longest conversation. Rows whose
session was evicted (a turn cache smaller than the episodes' KV) need their whole prompt
prefilled: they get a forward of their own over the same buffer, so that the rows that
reuse KV prefill only their window (the longest new part among them; a row whose new part is
shorter recomputes a few of its last reused positions).

Before: the reused KV left-padded to the longest reuse, then the new tokens left-padded to
the longest new part, built as a `DynamicCache` (a copy), concatenated with the new tokens'
KV (another) and copied into the decode's buffer (a third): 64 FrozenLake-sized
episodes of ~720 tokens, about half of them evicted, peaked at 8.4 GB (with the ~2 GB that
glibc kept, `host_memory.py`) where the conversations' KV is 2.1 GB; now 4.9 GB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
from transformers.cache_utils import DynamicLayer

from rollcli.data.padding import pad_left, position_ids_from_mask
from rollcli.models.moe_routing import recorded_routing, unset_like
from rollcli.strategies.hf_kv_buffer import BufferLayer, session_cache
from rollcli.strategies.hf_turn_cache import Session


@dataclass
class Prefilled:
    cache: Any  # a transformers cache of the batch
    logits: torch.Tensor  # [B, V]: each row's last position
    mask: torch.Tensor  # [B, width]: 1 on each row's real positions
    next_position: torch.Tensor  # [B]: the position of each row's first new token
    order: list[int]  # row r of the batch is prompt order[r]
    # an MoE engine's record: prompt i's experts at each of its tokens, `[len, layers, k]`
    routing: list[torch.Tensor] | None = None


# Prompts that share at least this many leading tokens (a tool env's system prompt, which
# declares the tools: 270 of the tool recipes' ~291 first-turn tokens) compute them once.
SHARED_PREFIX_MIN = 64
# A shorter shared head is computed once where that saves this many prompt tokens in all:
# a validation chunk of 64 rlvr-math prompts (48 tokens, ~31 of them the chat template's
# system line and the task's sentence) prefills ~1,100 tokens instead of ~3,100. A step's 8
# prompts would save ~220, little against the extra forward, and keep one plain forward.
SHARED_PREFIX_SAVES = 512
SHARED_PREFIX_FLOOR = 16  # tokens: under it the head is never worth a forward of its own


def prefill(
    model: torch.nn.Module,
    prompts: list[list[int]],
    pad_token_id: int,
    room: int = 0,
    **forward: Any,
) -> Prefilled:
    """One forward over the left-padded `prompts` into the model's own cache (`forward`:
    extra arguments of the model's forward). Identical prompts are computed once and their
    row repeated (a multi-turn group's episodes open with the same prompt), and a prefix of
    at least `SHARED_PREFIX_MIN` tokens that every prompt opens with (or a shorter one that
    saves `SHARED_PREFIX_SAVES` tokens over the batch) is computed once, the rest over it as
    sessions do (`room`: the free positions the decode will append)."""
    device = next(model.parameters()).device
    distinct: dict[tuple[int, ...], int] = {}
    rows = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    unique = [list(p) for p in distinct]
    shared = shared_prefix(model, unique, **forward)
    if shared is not None:
        reuse = [(shared, len(shared.ids))] * len(unique)
        done = prefill_sessions(model, unique, reuse, pad_token_id, room, **forward)
    else:
        ids, mask = pad_left(unique, pad_token_id)
        positions = position_ids_from_mask(mask)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, **forward
        )
        order = list(range(len(unique)))
        routing = recorded_routing(model, ids.shape)
        if routing is not None:  # each prompt's own (right-aligned) columns
            routing = [routing[u, ids.shape[1] - len(p) :] for u, p in enumerate(unique)]
        done = Prefilled(
            out.past_key_values, out.logits[:, -1], mask, positions[:, -1] + 1, order, routing
        )
    if len(unique) == len(prompts):
        return done
    # both paths keep the prompts' order (every row reuses the head): row u is unique[u]
    index = torch.tensor(rows, device=device)
    take_rows(done.cache, index)
    return Prefilled(
        done.cache,
        done.logits[index],
        done.mask[index],
        done.next_position[index],
        list(range(len(prompts))),
        None if done.routing is None else [done.routing[u] for u in rows],
    )


def shared_prefix(
    model: torch.nn.Module, prompts: list[list[int]], **forward: Any
) -> Session | None:
    """The KV of the leading tokens every prompt shares (each keeps at least its last token
    to prefill), as a session the prompts reuse; None when there are fewer than two prompts,
    a shared head too short to pay for its own forward (`worth_sharing`), or a layer the
    sessions cannot hold (a sliding window)."""
    if len(prompts) < 2:
        return None
    n = len(os.path.commonprefix(prompts))
    n = min(n, min(len(p) for p in prompts) - 1)
    if not worth_sharing(n, len(prompts)):
        return None
    device = next(model.parameters()).device
    ids = torch.tensor([prompts[0][:n]], device=device)
    cache = model(input_ids=ids, use_cache=True, **forward).past_key_values
    routing = recorded_routing(model, ids.shape)
    if any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    layers = [(layer.keys[0], layer.values[0]) for layer in cache.layers]
    return Session(prompts[0][:n], layers, None if routing is None else routing[0])


def worth_sharing(head: int, prompts: int) -> bool:
    """Whether `prompts` prompts opening with the same `head` tokens compute them once."""
    if head >= SHARED_PREFIX_MIN:
        return True
    return head >= SHARED_PREFIX_FLOOR and head * (prompts - 1) >= SHARED_PREFIX_SAVES


def take_rows(cache: Any, index: torch.Tensor) -> None:
    """`cache`'s rows become rows `index` of it, in that order, repeats allowed."""
    for layer in cache.layers:
        if isinstance(layer, BufferLayer):
            layer.take_rows(index)
        else:
            layer.batch_select_indices(index)  # a DynamicLayer indexes: repeats are kept


def prefill_sessions(
    model: torch.nn.Module,
    prompts: list[list[int]],
    reuse: list[tuple[Session | None, int]],
    pad_token_id: int,
    room: int,
    **forward: Any,
) -> Prefilled:
    """`prompts` with `reuse[i] = (session, n)`: prompt `i`'s first `n` tokens' KV is held by
    `session` (at least one row reuses some). Rows are ordered reusing first, each
    right-aligned to the longest prompt, with `room` free positions after it."""
    reusing = [i for i, (_, n) in enumerate(reuse) if n]
    fresh = [i for i, (_, n) in enumerate(reuse) if not n]
    order = reusing + fresh
    width = max(len(p) for p in prompts)
    held_layers = reuse[reusing[0]][0].layers
    device = held_layers[0][0].device
    buffers = []
    for k0, _ in held_layers:
        keys = k0.new_zeros(len(order), k0.shape[0], width + room, k0.shape[2])
        buffers.append((keys, torch.zeros_like(keys)))
    lengths = torch.tensor([len(prompts[i]) for i in order], device=device)
    mask = (torch.arange(width, device=device) >= width - lengths[:, None]).long()
    positions = position_ids_from_mask(mask)
    logits = []
    routing: list[torch.Tensor | None] = [None] * len(prompts)
    for start, rows in ((0, reusing), (len(reusing), fresh)):
        if not rows:
            continue
        # the window every row of the group prefills: its longest part not reused
        window = max(len(prompts[i]) - reuse[i][1] for i in rows)
        ids = torch.full((len(rows), window), pad_token_id, dtype=torch.long)
        for r, i in enumerate(rows):
            prompt = prompts[i]
            take = min(window, len(prompt))
            ids[r, window - take :] = torch.tensor(prompt[len(prompt) - take :])
            held = len(prompt) - take  # positions before the window: from the session
            if held:
                session = reuse[i][0]
                for (keys, values), (k, v) in zip(buffers, session.layers, strict=True):
                    keys[start + r, :, width - len(prompt) : width - window] = k[:, :held]
                    values[start + r, :, width - len(prompt) : width - window] = v[:, :held]
        span = slice(start, start + len(rows))
        cache = session_cache([(k[span], v[span]) for k, v in buffers], width - window)
        out = model(
            input_ids=ids.to(device),
            attention_mask=mask[span],
            position_ids=positions[span, width - window :],
            past_key_values=cache,
            use_cache=True,
            **forward,
        )
        logits.append(out.logits[:, -1])
        recorded = recorded_routing(model, ids.shape)
        if recorded is not None:
            for r, i in enumerate(rows):
                routing[i] = _prompt_routing(prompts[i], reuse[i][0], window, recorded[r])
    return Prefilled(
        session_cache(buffers, width),
        torch.cat(logits),
        mask,
        lengths,
        order,
        None if routing[0] is None else routing,  # type: ignore[arg-type]
    )


def _prompt_routing(
    prompt: list[int], session: Session | None, window: int, recorded: torch.Tensor
) -> torch.Tensor:
    """A prompt's experts per token: its window's from this forward (`recorded`, the
    window's `[window, layers, k]`), the positions before it from its session's record
    (UNSET where the session holds none)."""
    take = min(window, len(prompt))
    held = len(prompt) - take
    own = recorded[window - take :]
    if not held:
        return own
    if session is None or session.routing is None or len(session.routing) < held:
        return torch.cat([unset_like(own, held), own])
    return torch.cat([session.routing[:held], own])

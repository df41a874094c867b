"""The shared-prefix layout: each prompt once, every response of its group attending to it.

GRPO-style rollouts hold `n` samples of one prompt, so the plain `[prompt | response]` rows
compute the prompt `n` times (rlvr-math: a 46-token prompt and ~31-token responses, a
group of 8 is 616 tokens of which 294 differ). Here a micro-batch's rows that share their
prompt (same real tokens and positions) become one packed row (the Prefix Grouper layout):

    input_ids     [G, L]  P, R_1, R_2, ..., R_k, then right padding
    position_ids  [G, L]  P's own; each R_i continues from P's end, as in its plain row
    segments      [G, L]  0 on P, i on R_i, -1 on padding
    attention     [G, 1, L, L]  R_i sees P and itself causally, P sees P causally

The token `R_i[0]` is predicted by P's last position (one hidden state, k targets) and
`R_i[t]` by `R_i[t-1]`: `source` names those positions, row-major over the plain
`[B, R]` response layout, and `scatter` puts per-token results back there. Every token sees
exactly the keys and positions it sees in its plain row, so log-probs, values and every
gradient equal the plain computation (up to float summation order); gradients from all k
responses flow into the one copy of P.

>>> import torch
>>> ids = torch.tensor([[0, 5, 6, 7, 8], [0, 5, 6, 9, 0], [4, 5, 6, 1, 0]])
>>> mask = torch.tensor([[0, 1, 1, 1, 1], [0, 1, 1, 1, 0], [1, 1, 1, 1, 0]])
>>> layout = shared_prefix_layout(ids, mask, (mask.cumsum(1) - 1).clamp(min=0), 3)
>>> layout.input_ids.tolist()  # rows 0 and 1 share the prompt [5, 6]
[[5, 6, 7, 8, 9], [4, 5, 6, 1, 0]]
>>> layout.position_ids.tolist()
[[0, 1, 2, 3, 2], [0, 1, 2, 3, 0]]
>>> layout.segments.tolist()
[[0, 0, 1, 1, 2], [0, 0, 0, 1, -1]]
>>> layout.source.tolist()  # (packed row, column) predicting 7, 8 | 9 | 1
[[0, 1], [0, 2], [0, 1], [1, 2]]
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import PROMPT_WIDTH
from rollcli.data.micro_batch import trim_padding


@dataclass(frozen=True)
class SharedPrefixLayout:
    input_ids: Tensor  # [G, L]
    position_ids: Tensor  # [G, L]
    segments: Tensor  # [G, L]: 0 prompt, i > 0 the row's i-th response, -1 padding
    source: Tensor  # [N, 2]: (packed row, column) whose output predicts each response token
    labels: Tensor  # [N]: the response tokens, row-major over the plain [B, R] layout
    real: Tensor  # [B, R] bool: the plain layout's response tokens (N of them)
    origin: Tensor  # [G, L, 2]: the plain (row, column) of each packed position, -1 padding

    def attention(self) -> Tensor:
        """`[G, 1, L, L]` bool, True where query q may attend to key k: causal, within a
        segment, and from a response to its prompt. A padding position sees the padding up
        to itself (so no query row is empty); no real token sees padding."""
        seg = self.segments
        length = seg.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=seg.device).tril()
        q, k = seg[:, :, None], seg[:, None, :]
        allowed = (q == k) | ((k == 0) & (q > 0))
        return (allowed & causal)[:, None]

    def pick(self, per_position: Tensor) -> Tensor:
        """`[G, L, ...]` outputs at the `source` positions: `[N, ...]`."""
        return take_positions(per_position, self.source)

    def pack(self, per_column: Tensor, fill: int | float = 0) -> Tensor:
        """A plain per-column tensor (`[B, P+R, ...]`, e.g. an MoE model's routing) in the
        packed layout, `[G, L, ...]`, `fill` on the padding."""
        flat = per_column.flatten(0, 1)
        where = self.origin[..., 0] * per_column.shape[1] + self.origin[..., 1]
        picked = flat.index_select(0, where.clamp(min=0).flatten().to(flat.device))
        out = picked.view(*where.shape, *per_column.shape[2:])
        pad = (where < 0).view(*where.shape, *([1] * (per_column.dim() - 2)))
        return out.masked_fill(pad.to(out.device), fill)

    def scatter(self, values: Tensor) -> Tensor:
        """`[N]` per-token values back into the plain `[B, R]` layout (0 elsewhere)."""
        out = torch.zeros(self.real.shape, dtype=values.dtype, device=values.device)
        return out.masked_scatter(self.real, values)


def take_positions(per_position: Tensor, where: Tensor) -> Tensor:
    """`per_position[where[:, 0], where[:, 1]]` for `[G, L, ...]` and `[N, 2]`, with a
    backward that is repeatable bit for bit. A prompt's last position predicts the first
    token of each of its k responses, so `where` repeats it, and the gradients of repeated
    positions are summed. Advanced indexing sums them with `index_put_(accumulate=True)`,
    whose CPU kernel adds from several threads in whatever order they run: the summed
    gradient then changes in its last bits with the machine's load, and a seeded run does
    not repeat (measured: the same rlvr-math step gave different weights under load).
    `index_select` over the flattened positions backpropagates through `index_add_`, which
    adds in index order."""
    flat = per_position.flatten(0, 1)
    return flat.index_select(0, where[:, 0] * per_position.shape[1] + where[:, 1])


# a row's prompt: its real prompt tokens and their positions
PromptKey = tuple[tuple[int, ...], tuple[int, ...]]


def prompt_keys(
    input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor, width: int
) -> list[PromptKey]:
    """Per row, what its prompt is: its real prompt tokens and their positions."""
    real = attention_mask[:, :width].bool()
    return [
        (
            tuple(input_ids[i, :width][real[i]].tolist()),
            tuple(position_ids[i, :width][real[i]].tolist()),
        )
        for i in range(input_ids.shape[0])
    ]


def shared_prefix_layout(
    input_ids: Tensor, attention_mask: Tensor, position_ids: Tensor, prompt_width: int
) -> SharedPrefixLayout:
    """The packed layout (module docstring) of plain rollout rows `[B, P+R]`: prompts
    left-padded to `prompt_width`, responses right-padded after it."""
    width = prompt_width
    attention = attention_mask.bool()
    real = attention[:, width:]
    _check_padding(attention[:, :width], real)
    keys = prompt_keys(input_ids, attention_mask, position_ids, width)
    groups: dict[PromptKey, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    packed: list[tuple[list[int], list[int], list[int]]] = []
    origins: list[list[tuple[int, int]]] = []
    sources: list[list[tuple[int, int]]] = [[] for _ in keys]
    for g, ((prompt, positions), rows) in enumerate(groups.items()):
        ids, pos, seg = list(prompt), list(positions), [0] * len(prompt)
        first = rows[0]
        prompt_cols = attention[first, :width].nonzero().flatten().tolist()
        origin = [(first, c) for c in prompt_cols]
        for j, i in enumerate(rows, start=1):
            n = int(real[i].sum())
            start = len(ids)
            ids += input_ids[i, width : width + n].tolist()
            pos += position_ids[i, width : width + n].tolist()
            seg += [j] * n
            origin += [(i, width + t) for t in range(n)]
            # R_i[0] from the prompt's last position, R_i[t] from R_i[t-1]
            sources[i] = [(g, start + t - 1 if t else len(prompt) - 1) for t in range(n)]
        packed.append((ids, pos, seg))
        origins.append(origin)
    length = max(len(ids) for ids, _, _ in packed)
    shape = (len(packed), length)
    out_ids = torch.zeros(shape, dtype=input_ids.dtype)
    out_pos = torch.zeros(shape, dtype=position_ids.dtype)
    out_seg = torch.full(shape, -1, dtype=torch.long)
    out_origin = torch.full((*shape, 2), -1, dtype=torch.long)
    for g, (ids, pos, seg) in enumerate(packed):
        out_ids[g, : len(ids)] = torch.tensor(ids, dtype=input_ids.dtype)
        out_pos[g, : len(pos)] = torch.tensor(pos, dtype=position_ids.dtype)
        out_seg[g, : len(seg)] = torch.tensor(seg)
        out_origin[g, : len(ids)] = torch.tensor(origins[g], dtype=torch.long)
    flat = [s for row in sources for s in row]
    device = input_ids.device
    return SharedPrefixLayout(
        input_ids=out_ids.to(device),
        position_ids=out_pos.to(device),
        segments=out_seg.to(device),
        source=torch.tensor(flat, dtype=torch.long).reshape(-1, 2).to(device),
        labels=input_ids[:, width:][real],
        real=real,
        origin=out_origin.to(device),
    )


def _check_padding(prompt_real: Tensor, response_real: Tensor) -> None:
    """Prompts must be left-padded and non-empty, responses right-padded (the rollout
    layout, `rollcli.data.padding`): elsewhere a token's predictor is not its neighbour."""
    if not bool(prompt_real[:, -1].all()):
        raise ValueError("shared prefix: every row needs a prompt, left-padded up to prompt_width")
    if bool((prompt_real[:, 1:].int() < prompt_real[:, :-1].int()).any()):
        raise ValueError("shared prefix: a prompt has padding inside it (prompts are left-padded)")
    if bool((response_real[:, 1:].int() > response_real[:, :-1].int()).any()):
        raise ValueError(
            "shared prefix: a response has padding inside it (responses are right-padded)"
        )


def packed_tokens(prompt_lengths: dict[PromptKey, int], rows: list[tuple[PromptKey, int]]) -> int:
    """Tokens of the packed rows of `rows` ((prompt key, response length) pairs), padded to
    the longest: what one forward over them computes."""
    per_group: dict[PromptKey, int] = {}
    for key, response in rows:
        per_group[key] = per_group.get(key, prompt_lengths[key]) + response
    return len(per_group) * max(per_group.values())


def shared_prefix_micro_batches(
    batch: Batch, size: int, max_tokens: int | None = None
) -> list[tuple[Tensor, Batch]]:
    """Micro-batches of at most `size` rows whose rows that share a prompt are next to each
    other, so each prompt is computed once per micro-batch; with `max_tokens`, at most that
    many tokens in the packed layout (a single longer row makes its own micro-batch).

    Rows are taken group by group in the order the prompts first appear (a rollout batch
    keeps a group's rows together, so a group stays in one micro-batch when `size` is a
    multiple of the group size). Without a budget there are `ceil(B / size)` micro-batches,
    as data-parallel ranks under ZeRO-3 need. Each is trimmed of padding; returns
    `(row_indices, micro_batch)` pairs like `length_sorted_micro_batches`.
    """
    width = int(batch[PROMPT_WIDTH][0])
    mask = batch["attention_mask"]
    keys = prompt_keys(batch["input_ids"], mask, batch["position_ids"], width)
    prompt_lengths = {key: len(key[0]) for key in keys}
    responses = mask[:, width:].sum(dim=1).tolist()
    order: dict[PromptKey, list[int]] = {}
    for i, key in enumerate(keys):
        order.setdefault(key, []).append(i)
    micros: list[list[int]] = []
    for i in (i for rows in order.values() for i in rows):
        micro = micros[-1] if micros else None
        fits = micro is not None and len(micro) < size
        if fits and micro is not None and max_tokens is not None:
            rows = [(keys[j], responses[j]) for j in [*micro, i]]
            fits = packed_tokens(prompt_lengths, rows) <= max_tokens
        if fits and micro is not None:
            micro.append(i)
        else:
            micros.append([i])
    out = []
    for micro in micros:
        idx = torch.tensor(micro, dtype=torch.long)
        out.append((idx, trim_padding(batch.select(idx))))
    return out

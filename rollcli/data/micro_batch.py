"""Micro-batches with as little padding as possible.

A rollout batch is padded to its longest prompt and longest response. Sorting rows by
length and trimming each micro-batch to its own longest row removes most of that padding:
on a CPU, compute is proportional to the padded token count.
"""

from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    ACTION_MASK,
    ADVANTAGES,
    BEHAVIOUR_LOGPROBS,
    OLD_LOGPROBS,
    OLD_ROUTED_EXPERTS,
    PROMPT_WIDTH,
    REF_LOGPROBS,
    RESPONSE_MASK,
    RETURNS,
    ROUTED_EXPERTS,
    VALUES,
)

# per column of the `[prompt | response]` rows (an MoE model's routing: `[B, T, layers, k]`)
SEQUENCE_KEYS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    ROUTED_EXPERTS,
    OLD_ROUTED_EXPERTS,
)
RESPONSE_KEYS = (
    RESPONSE_MASK,
    ADVANTAGES,
    RETURNS,
    OLD_LOGPROBS,
    REF_LOGPROBS,
    VALUES,
    BEHAVIOUR_LOGPROBS,
    ACTION_MASK,
)


def trim_padding(batch: Batch) -> Batch:
    """Drop the columns that are padding in every row of `batch` (left of the prompts, right
    of the responses); `prompt_width` is updated so responses still start at it.

    A response ends at its last attended token, not its last loss token: a multi-turn
    sample's `response_mask` has holes (the environment's turns) and may end early."""
    width = int(batch[PROMPT_WIDTH][0])
    attention = batch["attention_mask"]
    response_len = int(attention[:, width:].sum(dim=1).max().item()) if len(batch) else 0
    response_len = max(response_len, 1)
    prompt_mask = attention[:, :width]
    left_pad = int((prompt_mask.shape[1] - prompt_mask.sum(dim=1)).min().item())
    tensors = dict(batch.tensors)
    for key in SEQUENCE_KEYS:
        if key in tensors:
            tensors[key] = tensors[key][:, left_pad : width + response_len]
    for key in RESPONSE_KEYS:
        if key in tensors:
            tensors[key] = tensors[key][:, :response_len]
    tensors[PROMPT_WIDTH] = batch[PROMPT_WIDTH] - left_pad
    return Batch(tensors, dict(batch.fields), dict(batch.meta))


def length_groups(
    lengths: torch.Tensor, size: int, max_tokens: int | None = None, rows_per_item: int = 1
) -> list[torch.Tensor]:
    """Indices of items (rows, or pairs of `rows_per_item` rows) grouped by similar length:
    ascending, at most `size` items a group and, given `max_tokens`, at most that many padded
    tokens (rows x longest row); a single longer item still makes its own group.

    >>> [g.tolist() for g in length_groups(torch.tensor([5, 1, 3, 9]), 3, max_tokens=10)]
    [[1, 2], [0], [3]]
    """
    order = torch.argsort(lengths, stable=True)
    groups: list[list[int]] = []
    for i in order.tolist():  # ascending: the item added is the longest of its group
        group = groups[-1] if groups else None
        fits = group is not None and len(group) < size
        if fits and group is not None and max_tokens is not None:
            fits = (len(group) + 1) * rows_per_item * int(lengths[i]) <= max_tokens
        if fits and group is not None:
            group.append(i)
        else:
            groups.append([i])
    return [torch.tensor(group, dtype=order.dtype) for group in groups]


def length_sorted_micro_batches(
    batch: Batch, size: int, max_tokens: int | None = None
) -> list[tuple[torch.Tensor, Batch]]:
    """Split into micro-batches of rows of similar length, each trimmed of padding: at most
    `size` rows, and, given `max_tokens`, at most that many padded tokens (rows x longest
    row; a single longer row still makes its own micro-batch). The budget bounds the logits
    a forward holds (tokens x vocabulary), which long multi-turn rows would otherwise blow up.

    Returns `(row_indices, micro_batch)` pairs; `row_indices` say where the rows came from.
    """
    lengths = batch["attention_mask"].sum(dim=1)
    groups = length_groups(lengths, size, max_tokens)
    return [(idx, trim_padding(batch.select(idx))) for idx in groups]


def scatter_rows(
    parts: list[tuple[torch.Tensor, torch.Tensor]], total: int, width: int
) -> torch.Tensor:
    """Reassemble per-micro-batch `[b, r]` results into `[total, width]` in the original order."""
    out = torch.zeros(total, width, dtype=parts[0][1].dtype)
    for idx, values in parts:
        out[idx, : values.shape[1]] = values
    return out

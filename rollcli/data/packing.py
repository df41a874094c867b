"""Whole-sequence rows for SFT and distillation, with several short samples packed per row.

`sequence_batch` lays samples out as:

    input_ids    [B, T]  right-padded rows of one or more samples
    position_ids [B, T]  restart at 0 at each sample; padding continues the row's last sample
    loss_mask    [B, T]  1 where token t is a training target (it is predicted at t - 1)
    length       [B]     real tokens per row
    meta["targets"]      loss tokens in the whole batch (for an exact token mean)

A forward pass gets no attention mask: transformers reads the sample boundaries from the
restarting position ids and keeps attention causal and within each sample; right padding
comes after every real token, so no real token attends to it.

>>> groups = pack([5, 3, 4, 2], capacity=8)
>>> groups
[[0, 1], [2, 3]]
"""

from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.data.micro_batch import length_groups

Sample = tuple[list[int], list[int]]  # (token ids, loss mask)


def response_sample(prompt: list[int], response: list[int]) -> Sample:
    """A prompt and a generated response as one sample whose loss tokens are the response's
    (each predicted from the position before it; the prompt is context only).

    >>> response_sample([5, 6], [7, 8])
    ([5, 6, 7, 8], [0, 0, 1, 1])
    """
    return [*prompt, *response], [0] * len(prompt) + [1] * len(response)


def pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """Group sample indices into rows of at most `capacity` tokens: first-fit decreasing
    (deterministic); each row lists its samples in the order they were placed."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        if lengths[i] > capacity:
            raise ValueError(f"sample {i} has {lengths[i]} tokens, more than {capacity}")
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(capacity - lengths[i])
    return rows


def sequence_batch(samples: list[Sample], pad_id: int, capacity: int, packing: bool) -> Batch:
    """The layout in the module docstring; `packing=False` gives one sample per row."""
    groups = pack([len(ids) for ids, _ in samples], capacity) if packing else None
    groups = groups or [[i] for i in range(len(samples))]
    rows = []
    for group in groups:
        ids: list[int] = []
        pos: list[int] = []
        mask: list[int] = []
        for i in group:
            sample_ids, sample_mask = samples[i]
            ids += sample_ids
            pos += list(range(len(sample_ids)))
            mask += [0] + list(sample_mask[1:])  # a sample's first token has no prediction
        rows.append((ids, pos, mask))
    width = max(len(ids) for ids, _, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((len(rows), width), dtype=torch.long)
    loss_mask = torch.zeros((len(rows), width), dtype=torch.float32)
    for r, (ids, pos, mask) in enumerate(rows):
        n = len(ids)
        input_ids[r, :n] = torch.tensor(ids)
        position_ids[r, :n] = torch.tensor(pos)
        position_ids[r, n:] = torch.arange(pos[-1] + 1, pos[-1] + 1 + width - n)
        loss_mask[r, :n] = torch.tensor(mask, dtype=torch.float32)
    tensors = {
        "input_ids": input_ids,
        "position_ids": position_ids,
        "loss_mask": loss_mask,
        "length": torch.tensor([len(ids) for ids, _, _ in rows]),
    }
    return Batch(tensors, {}, {"targets": int(loss_mask.sum())})


def sequence_micro_batches(
    batch: Batch, size: int, max_tokens: int | None = None
) -> list[tuple[torch.Tensor, Batch]]:
    """Micro-batches of at most `size` rows of similar length (and, given `max_tokens`, at
    most that many padded tokens), each cut to its longest row.

    Every tensor whose second dimension is the row width is cut. Returns
    `(row_indices, micro_batch)` pairs."""
    width = batch["input_ids"].shape[1]
    out = []
    for idx in length_groups(batch["length"], size, max_tokens):
        micro = batch.select(idx)
        keep = int(micro["length"].max())
        for key, value in micro.tensors.items():
            if value.dim() >= 2 and value.shape[1] == width:
                micro.tensors[key] = value[:, :keep]
        out.append((idx, micro))
    return out

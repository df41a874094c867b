"""Padding in one place: token lists → `input_ids`, `attention_mask`, `position_ids`, masks.

A rollout row is `[prompt, left-padded to P | response, right-padded to R]`, so the
response always starts at column P and `logits[:, P-1 : P+R-1]` predict it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rollcli.data.batch_keys import PROMPT_WIDTH, RESPONSE_MASK


def _pad(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int | None, left: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    width = max((len(s) for s in seqs), default=0) if width is None else width
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            cols = slice(width - len(s), width) if left else slice(0, len(s))
            ids[i, cols] = torch.as_tensor(s, dtype=torch.long)
            mask[i, cols] = 1
    return ids, mask


def pad_left(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(ids, mask)` with every sequence right-aligned (prompts, for generation)."""
    return _pad(seqs, pad_id, width, left=True)


def pad_right(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """`(ids, mask)` with every sequence left-aligned (responses)."""
    return _pad(seqs, pad_id, width, left=False)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding: 0 at each row's first real token."""
    return (attention_mask.cumsum(dim=1) - 1).clamp(min=0)


def rollout_tensors(
    prompts: Sequence[Sequence[int]], responses: Sequence[Sequence[int]], pad_id: int
) -> dict[str, torch.Tensor]:
    """Pack prompt and response token ids into the training layout.

    Returns `input_ids [B, P+R]`, `attention_mask`, `position_ids`, `prompt_len` (P, scalar
    per row) and `response_mask [B, R]` (1 on real response tokens).
    """
    p_ids, p_mask = pad_left(prompts, pad_id)
    r_ids, r_mask = pad_right(
        responses, pad_id, width=max(1, max((len(r) for r in responses), default=1))
    )
    attention_mask = torch.cat([p_mask, r_mask], dim=1)
    return {
        "input_ids": torch.cat([p_ids, r_ids], dim=1),
        "attention_mask": attention_mask,
        "position_ids": position_ids_from_mask(attention_mask),
        RESPONSE_MASK: r_mask.float(),
        PROMPT_WIDTH: torch.full((len(prompts),), p_ids.shape[1], dtype=torch.long),
    }

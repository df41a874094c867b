"""Forward passes over whole-sequence rows (`rollcli.data.packing` layout).

Only the positions that predict a loss token go through the LM head: on a small model the
head is a large share of the compute, and `[B, T, V]` logits of packed rows would be
hundreds of megabytes.
"""

from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.strategies.lm_head import plain_head


def target_logits(model, micro: Batch) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """`(logits [N, V], labels [N])` for the N loss tokens of `micro`, row by row in order.

    No attention mask is passed: the restarting position ids keep packed samples apart.
    """
    input_ids, position_ids = micro["input_ids"], micro["position_ids"]
    mask = micro["loss_mask"][:, 1:].bool()
    labels = input_ids[:, 1:][mask]
    head = plain_head(model)
    if head is not None:
        hidden = model.get_decoder()(
            input_ids=input_ids, position_ids=position_ids, use_cache=False
        ).last_hidden_state
        return head(hidden[:, :-1][mask]), labels
    # heads that scale or cap their logits: let the model compute them
    logits = model(input_ids=input_ids, position_ids=position_ids, use_cache=False).logits
    return logits[:, :-1][mask], labels


def split_rows(values: torch.Tensor, micro: Batch) -> list[torch.Tensor]:
    """Per-row pieces of `[N, ...]` values laid out like `target_logits` returns them."""
    counts = micro["loss_mask"][:, 1:].sum(dim=1).long().tolist()
    return list(torch.split(values, counts))

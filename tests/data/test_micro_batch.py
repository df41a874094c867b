from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.data.micro_batch import length_sorted_micro_batches, scatter_rows, trim_padding
from rollcli.data.padding import rollout_tensors


def _batch() -> Batch:
    # prompts of 1, 3 and 2 tokens; responses of 1, 4 and 2 tokens (pad id 0)
    t = rollout_tensors([[5], [6, 7, 8], [9, 4]], [[1], [2, 3, 4, 5], [6, 7]], pad_id=0)
    t["advantages"] = t["response_mask"] * torch.tensor([[1.0], [2.0], [3.0]])
    return Batch(t)


def test_trim_drops_columns_that_are_padding_in_every_row() -> None:
    b = _batch().select([0, 2])  # prompts 1 and 2 tokens, responses 1 and 2 tokens
    t = trim_padding(b)
    # prompt width 3 → 2 (one left column is padding in both rows); responses 4 → 2
    assert t["input_ids"].tolist() == [[0, 5, 1, 0], [9, 4, 6, 7]]
    assert t["prompt_width"].tolist() == [2, 2]
    assert t["response_mask"].tolist() == [[1, 0], [1, 1]]
    assert t["advantages"].tolist() == [[1.0, 0.0], [3.0, 3.0]]
    assert t["position_ids"].tolist() == [[0, 0, 1, 1], [0, 1, 2, 3]]  # pads repeat a position


def test_micro_batches_group_similar_lengths_and_scatter_back() -> None:
    b = _batch()
    parts = length_sorted_micro_batches(b, 2)
    assert [idx.tolist() for idx, _ in parts] == [[0, 2], [1]]  # total lengths 2, 4, 7
    values = [(idx, micro["response_mask"] * (idx[:, None] + 1)) for idx, micro in parts]
    out = scatter_rows(values, len(b), b["response_mask"].shape[1])
    assert out.tolist() == [[1, 0, 0, 0], [2, 2, 2, 2], [3, 3, 0, 0]]


def test_token_budget_splits_micro_batches_of_long_rows() -> None:
    b = _batch()  # attended lengths 2, 7, 4 → sorted rows 0 (2), 2 (4), 1 (7)
    # budget 8: [0, 2] costs 2 x 4 = 8 tokens; adding row 1 would cost 3 x 7 = 21
    assert [i.tolist() for i, _ in length_sorted_micro_batches(b, 8, max_tokens=8)] == [
        [0, 2],
        [1],
    ]
    # budget 7: [0, 2] would cost 8, so each row alone; row 1 (7 tokens) still gets its own
    assert [i.tolist() for i, _ in length_sorted_micro_batches(b, 8, max_tokens=7)] == [
        [0],
        [2],
        [1],
    ]
    # no budget: only the row count splits
    assert [i.tolist() for i, _ in length_sorted_micro_batches(b, 8)] == [[0, 2, 1]]

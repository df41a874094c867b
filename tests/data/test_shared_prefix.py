"""The shared-prefix layout: every response token sees exactly the keys (token, position) of
its plain row and is predicted from the same token; micro-batches keep a prompt's rows
together within their row and token budgets."""

from __future__ import annotations

import doctest

import pytest
import torch

from rollcli.data import shared_prefix
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.data.shared_prefix import (
    packed_tokens,
    prompt_keys,
    shared_prefix_layout,
    shared_prefix_micro_batches,
)

# groups of 3, 1 and 2 rows with prompts of 4, 2 and 3 tokens; an empty response; the
# group of 2 split by the group of 1 (rows of a prompt need not be next to each other)
PROMPTS = [[1, 2, 3, 4], [1, 2, 3, 4], [5, 6], [7, 8, 9], [1, 2, 3, 4], [7, 8, 9]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [], [23, 24, 25, 26]]


def _batch() -> Batch:
    return Batch(rollout_tensors(PROMPTS, RESPONSES, pad_id=0))


def _layout(batch: Batch):
    return shared_prefix_layout(
        batch["input_ids"],
        batch["attention_mask"],
        batch["position_ids"],
        int(batch["prompt_width"][0]),
    )


def test_docstring_example():
    assert doctest.testmod(shared_prefix).failed == 0


def test_each_prompt_once_then_its_responses():
    layout = _layout(_batch())
    assert layout.input_ids.tolist() == [
        [1, 2, 3, 4, 10, 11, 12, 13, 0],
        [5, 6, 14, 15, 16, 17, 18, 19, 0],
        [7, 8, 9, 20, 21, 23, 24, 25, 26],
    ]
    assert layout.position_ids.tolist() == [
        [0, 1, 2, 3, 4, 5, 6, 4, 0],
        [0, 1, 2, 3, 4, 5, 6, 7, 0],
        [0, 1, 2, 3, 4, 3, 4, 5, 6],
    ]
    assert layout.segments.tolist() == [
        [0, 0, 0, 0, 1, 1, 1, 2, -1],
        [0, 0, 1, 1, 1, 1, 1, 1, -1],
        [0, 0, 0, 1, 1, 2, 2, 2, 2],
    ]
    # row-major over [B, R]: the first token of each response from its prompt's last position
    assert layout.source.tolist() == [
        [0, 3], [0, 4], [0, 5],  # row 0: 10 11 12
        [0, 3],  # row 1: 13
        [1, 1], [1, 2], [1, 3], [1, 4], [1, 5], [1, 6],  # row 2
        [2, 2], [2, 3],  # row 3: 20 21
        [2, 2], [2, 5], [2, 6], [2, 7],  # row 5: 23 24 25 26 (row 4 has no tokens)
    ]  # fmt: skip
    assert layout.labels.tolist() == [t for r in RESPONSES for t in r]


def test_every_token_sees_the_keys_of_its_plain_row():
    """A loop over the plain rows: the (token, position) pairs a response token attends to,
    and the token that predicts it, are the same in both layouts."""
    batch = _batch()
    layout = _layout(batch)
    allowed = layout.attention()[:, 0]
    width = int(batch["prompt_width"][0])
    ids, pos, mask = batch["input_ids"], batch["position_ids"], batch["attention_mask"]
    n = 0
    for i in range(len(batch)):
        for t in range(int(mask[i, width:].sum())):
            col = width + t  # the plain query at this response token
            plain = {(int(ids[i, k]), int(pos[i, k])) for k in range(col + 1) if mask[i, k]}
            # its packed column: the source of the next token, or found by segment
            g = int(layout.source[n, 0])
            q = _packed_column(layout, g, int(ids[i, col]), int(pos[i, col]), i, batch)
            packed = {
                (int(layout.input_ids[g, k]), int(layout.position_ids[g, k]))
                for k in range(layout.input_ids.shape[1])
                if allowed[g, q, k]
            }
            assert packed == plain, (i, t)
            # the predictor of token t is the plain column before it
            src_g, src_c = layout.source[n].tolist()
            before = (int(ids[i, col - 1]), int(pos[i, col - 1]))
            assert (
                int(layout.input_ids[src_g, src_c]),
                int(layout.position_ids[src_g, src_c]),
            ) == before
            n += 1
    assert n == len(layout.labels)


def _packed_column(layout, g, token, position, row, batch) -> int:  # noqa: ANN001
    """The packed column of row `row`'s response token (token, position): its segment is
    the row's rank among the rows of its prompt."""
    width = int(batch["prompt_width"][0])
    keys = prompt_keys(batch["input_ids"], batch["attention_mask"], batch["position_ids"], width)
    segment = [j for j, key in enumerate(keys) if key == keys[row]].index(row) + 1
    for k in range(layout.input_ids.shape[1]):
        hit = (int(layout.input_ids[g, k]), int(layout.position_ids[g, k])) == (token, position)
        if hit and int(layout.segments[g, k]) == segment:
            return k
    raise AssertionError(f"row {row}: token {token} at {position} is not in packed row {g}")


def test_padding_sees_only_padding_and_no_real_token_sees_it():
    allowed = _layout(_batch()).attention()[:, 0]
    seg = _layout(_batch()).segments
    pad = seg == -1
    for g in range(seg.shape[0]):
        assert not allowed[g][~pad[g]][:, pad[g]].any()
        assert not allowed[g][pad[g]][:, ~pad[g]].any()
        assert allowed[g].diagonal().all()  # no query row is empty


def test_scatter_puts_tokens_back_in_the_plain_layout():
    batch = _batch()
    layout = _layout(batch)
    back = layout.scatter(layout.labels.float())
    width = int(batch["prompt_width"][0])
    plain = (batch["input_ids"][:, width:] * batch["attention_mask"][:, width:]).float()
    assert torch.equal(back, plain)


@pytest.mark.parametrize(
    ("prompt_mask", "response_mask", "what"),
    [
        ([1, 0, 1], [1, 0], "prompt has padding inside"),
        ([0, 0, 0], [1, 0], "every row needs a prompt"),
        ([0, 1, 1], [0, 1], "response has padding inside"),
    ],
)
def test_rows_out_of_the_rollout_layout_are_refused(prompt_mask, response_mask, what):
    mask = torch.tensor([prompt_mask + response_mask])
    ids = torch.arange(1, 6)[None]
    with pytest.raises(ValueError, match=what):
        shared_prefix_layout(ids, mask, (mask.cumsum(1) - 1).clamp(min=0), 3)


def test_micro_batches_keep_a_prompt_together():
    batch = _batch()
    parts = shared_prefix_micro_batches(batch, size=3)
    assert [idx.tolist() for idx, _ in parts] == [[0, 1, 4], [2, 3, 5]]
    for idx, micro in parts:  # each micro-batch is its rows, trimmed of padding
        assert torch.equal(micro["response_mask"].sum(1), batch["response_mask"][idx].sum(1))
    # without a budget: ceil(B / size) micro-batches, whatever the prompts
    assert len(shared_prefix_micro_batches(batch, size=4)) == 2
    assert len(shared_prefix_micro_batches(batch, size=1)) == 6


def test_micro_batches_respect_the_packed_token_budget():
    batch = _batch()
    width = int(batch["prompt_width"][0])
    keys = prompt_keys(batch["input_ids"], batch["attention_mask"], batch["position_ids"], width)
    lengths = {k: len(k[0]) for k in keys}
    responses = batch["attention_mask"][:, width:].sum(1).tolist()
    for budget in (6, 9, 12, 20):
        parts = shared_prefix_micro_batches(batch, size=6, max_tokens=budget)
        assert sorted(i for idx, _ in parts for i in idx.tolist()) == list(range(6))
        for idx, _ in parts:
            rows = [(keys[i], responses[i]) for i in idx.tolist()]
            assert len(rows) == 1 or packed_tokens(lengths, rows) <= budget, (budget, idx)
    # group 0 alone packs 4 + 3 + 1 + 0 = 8 tokens: a budget of 8 keeps it whole
    assert shared_prefix_micro_batches(batch, size=6, max_tokens=8)[0][0].tolist() == [0, 1, 4]


def test_picking_repeated_positions_backpropagates_in_index_order() -> None:
    """A prompt's last position predicts the first token of each of its responses, so the
    pick repeats it. Its gradient must be the sum in index order, bit for bit, whatever the
    threads do: advanced indexing summed it with `index_put_(accumulate=True)`, whose CPU
    kernel adds from several threads in the order they happen to run (a seeded rlvr-math
    step then gave different weights when the machine was loaded)."""
    from rollcli.data.shared_prefix import take_positions

    torch.manual_seed(0)
    hidden = torch.randn(3, 40, 64, requires_grad=True)
    where = torch.tensor([[0, 7]] * 50 + [[1, 3], [2, 39]] * 20 + [[0, 7]] * 30)
    grad_out = torch.randn(len(where), 64)
    picked = take_positions(hidden, where)
    assert torch.equal(picked, hidden[where[:, 0], where[:, 1]])
    assert type(picked.grad_fn).__name__ == "IndexSelectBackward0"  # -> index_add_
    picked.backward(grad_out)
    expected = torch.zeros_like(hidden)
    for (row, col), g in zip(where.tolist(), grad_out, strict=True):
        expected[row, col] += g  # one at a time, in index order
    assert torch.equal(hidden.grad, expected)

"""Loss aggregation modes against hand-computed numbers and a loop."""

import pytest
import torch

from rollcli.algorithms.aggregation import LOSS_AGG_MODES, aggregate_loss

LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])  # row 0: 1, 2; row 1: 4, 5, 6


@pytest.mark.parametrize(
    ("mode", "norm_len", "expected"),
    [
        ("token-mean", None, 18 / 5),  # (1+2+4+5+6) / 5 tokens
        ("seq-mean-token-mean", None, (1.5 + 5.0) / 2),  # row means 1.5 and 5
        ("seq-mean-token-sum", None, (3 + 15) / 2),  # row sums 3 and 15
        ("seq-mean-token-sum-norm", None, (3 + 15) / (2 * 3)),  # norm_len = T = 3
        ("seq-mean-token-sum-norm", 4, (3 + 15) / (2 * 4)),
    ],
)
def test_modes_by_hand(mode, norm_len, expected):
    assert aggregate_loss(LOSS, MASK, mode, norm_len).item() == pytest.approx(expected)


def test_seq_mean_token_mean_skips_empty_rows():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    assert aggregate_loss(LOSS, mask, "seq-mean-token-mean").item() == pytest.approx(1.5)


def test_unknown_mode_and_bad_shape_raise():
    with pytest.raises(ValueError, match="token-mean"):
        aggregate_loss(LOSS, MASK, "token-avg")
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        aggregate_loss(LOSS[0], MASK[0], "token-mean")


def _loop(loss, mask, mode, norm_len):
    rows = []
    for i in range(loss.shape[0]):
        vals = [loss[i, t].item() for t in range(loss.shape[1]) if mask[i, t]]
        rows.append(vals)
    if mode == "token-mean":
        flat = [v for r in rows for v in r]
        return sum(flat) / len(flat)
    if mode == "seq-mean-token-mean":
        means = [sum(r) / len(r) for r in rows if r]
        return sum(means) / len(means)
    if mode == "seq-mean-token-sum":
        return sum(sum(r) for r in rows) / len(rows)
    return sum(sum(r) / norm_len for r in rows) / len(rows)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_vectorised_matches_loop(mode):
    torch.manual_seed(1)
    loss = torch.randn(5, 8)
    mask = (torch.rand(5, 8) > 0.4).float()
    mask[:, 0] = 1
    got = aggregate_loss(loss, mask, mode, norm_len=8 if mode.endswith("norm") else None)
    assert got.item() == pytest.approx(_loop(loss, mask, mode, 8), abs=1e-5)

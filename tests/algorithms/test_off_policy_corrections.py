"""Off-policy corrections (`tis`, `mis`, `icepop`) and the sampler-vs-trainer mismatch
metrics, each against numbers worked out by hand."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.off_policy import (
    correction_weights,
    icepop_weights,
    mis_weights,
    mismatch_metrics,
    tis_weights,
    truncated_is_weights,
)

# two responses of three tokens; ratios r = pi_old / mu chosen as round numbers
RATIOS = [[2.0, 0.5, 4.0], [1.0, 3.0, 0.25]]
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # row 0's third token is padding


def _close(got: torch.Tensor, want: list[list[float]]) -> None:
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-5, atol=1e-6)


MU = torch.log(torch.full((2, 3), 0.1))
OLD = MU + torch.log(torch.tensor(RATIOS))


def test_tis_token_truncates_each_ratio_at_the_cap() -> None:
    w = tis_weights(OLD, MU, MASK, cap=2.5)
    _close(w, [[2.0, 0.5, 0.0], [1.0, 2.5, 0.25]])
    assert torch.equal(w, truncated_is_weights(OLD, MU, MASK, cap=2.5))


def test_tis_sequence_truncates_the_product_of_the_ratios() -> None:
    # row 0: R = 2 * 0.5 = 1 (padding left out); row 1: R = 1 * 3 * 0.25 = 0.75
    w = tis_weights(OLD, MU, MASK, cap=2.5, level="sequence")
    _close(w, [[1.0, 1.0, 0.0], [0.75, 0.75, 0.75]])
    # a cap below R truncates every token of the response
    assert tis_weights(OLD, MU, MASK, cap=0.9, level="sequence")[0, :2].tolist() == pytest.approx(
        [0.9, 0.9]
    )


def test_mis_token_drops_ratios_above_the_cap_and_keeps_the_rest_as_they_are() -> None:
    w = mis_weights(OLD, MU, MASK, cap=2.5)
    _close(w, [[2.0, 0.5, 0.0], [1.0, 0.0, 0.25]])


def test_mis_sequence_drops_whole_responses_whose_ratio_product_is_above_the_cap() -> None:
    w = mis_weights(OLD, MU, MASK, cap=0.9, level="sequence")  # R = 1 (dropped), 0.75 (kept)
    _close(w, [[0.0, 0.0, 0.0], [0.75, 0.75, 0.75]])


def test_mis_with_a_huge_ratio_gives_zero_not_nan() -> None:
    old, mu = torch.tensor([[0.0, 0.0]]), torch.tensor([[-200.0, 0.0]])
    assert mis_weights(old, mu, torch.ones(1, 2), cap=2.0).tolist() == [[0.0, 1.0]]
    assert mis_weights(old, mu, torch.ones(1, 2), 2.0, "sequence").tolist() == [[0.0, 0.0]]


def test_icepop_keeps_ratios_inside_the_band_and_drops_both_sides() -> None:
    w = icepop_weights(OLD, MU, MASK, band=(0.5, 2.0))  # 4, 3 and 0.25 leave [0.5, 2]
    _close(w, [[2.0, 0.5, 0.0], [1.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="0 < low < high"):
        icepop_weights(OLD, MU, MASK, band=(2.0, 0.5))


def test_correction_weights_metrics_and_none() -> None:
    assert correction_weights("none", OLD, MU, MASK) is None
    weights, metrics = correction_weights("mis", OLD, MU, MASK, cap=2.5)
    # real tokens: weights 2, 0.5 | 1, 0, 0.25; one of five dropped
    assert metrics["off_policy_weight_mean"] == pytest.approx((2 + 0.5 + 1 + 0 + 0.25) / 5)
    assert metrics["off_policy_corrected_frac"] == pytest.approx(1 / 5)
    _, tis = correction_weights("tis", OLD, MU, MASK, cap=1.5)  # 2 and 3 truncated
    assert tis["off_policy_corrected_frac"] == pytest.approx(2 / 5)
    assert not weights.requires_grad
    with pytest.raises(ValueError, match="per token"):
        correction_weights("icepop", OLD, MU, MASK, level="sequence")


def test_mismatch_metrics_by_hand() -> None:
    m = mismatch_metrics(OLD, MU, MASK, band=(0.5, 2.0))
    real = [2.0, 0.5, 1.0, 3.0, 0.25]
    k3 = sum(r - 1 - math.log(r) for r in real) / 5
    assert m["mismatch_kl"] == pytest.approx(k3)
    assert m["mismatch_ratio_mean"] == pytest.approx(sum(real) / 5)
    assert m["mismatch_ratio_min"] == pytest.approx(0.25)
    assert m["mismatch_ratio_max"] == pytest.approx(3.0)  # the padding's 4 is left out
    assert m["mismatch_outside_band"] == pytest.approx(2 / 5)  # 3 and 0.25


def test_mismatch_metrics_are_zero_when_sampler_and_trainer_agree() -> None:
    m = mismatch_metrics(MU, MU, MASK)
    assert m["mismatch_kl"] == 0.0 and m["mismatch_outside_band"] == 0.0
    assert m["mismatch_ratio_min"] == m["mismatch_ratio_max"] == 1.0
    assert mismatch_metrics(MU, MU, torch.zeros(2, 3))["mismatch_kl"] == 0.0

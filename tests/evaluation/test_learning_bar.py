"""The learning bar (rollcli/evaluation/learning_bar.py) against hand-computed numbers: the
t-test over seeds, the non-inferiority interval, the per-seed floor and its bound where a
table kept no McNemar counts."""

from __future__ import annotations

import math

import pytest

from rollcli.evaluation.learning_bar import (
    SeedFigures,
    SeedOutcomes,
    floor,
    judge,
    mcnemar_bound,
    render,
)
from rollcli.evaluation.stats import mcnemar_exact, student_t_quantile


def _fig(trained: float, base_boxed: float = 0.19, **kw) -> SeedFigures:
    return SeedFigures(n=256, base=0.047, base_boxed=base_boxed, trained=trained, **kw)


def test_the_claim_is_a_one_sample_t_test_of_trained_minus_base_boxed() -> None:
    # d = 0.10, 0.12, 0.08: mean 0.10, sd 0.02, se 0.02 / sqrt(3), t = 8.660, df 2
    figs = {"1": _fig(0.29), "2": _fig(0.31), "3": _fig(0.27)}
    c = judge(figs).claim
    se = 0.02 / math.sqrt(3)
    assert c.mean == pytest.approx(0.10)
    assert c.low == pytest.approx(0.10 - 4.302653 * se, abs=1e-6)  # t(2) 97.5% = 4.3027
    # two-sided p of t = 8.660 with 2 df: 1 - t / sqrt(2 + t^2) (the closed form for df 2)
    t = 0.10 / se
    assert c.p == pytest.approx(1 - t / math.sqrt(2 + t * t), rel=1e-6)
    assert c.p < 0.05 and c.p > 0.01  # significant at 5%, not at the bar's 1%
    assert not judge(figs).claim_met


def test_non_inferiority_reads_the_lower_bound_of_the_paired_interval() -> None:
    ref = {s: _fig(0.30) for s in "1234"}
    # differences -0.02, 0, +0.02, -0.04: mean -0.01, sd sqrt(0.002 / 3), t(3) 3.1824
    arm = {"1": _fig(0.28), "2": _fig(0.30), "3": _fig(0.32), "4": _fig(0.26)}
    d = judge(arm, ref).change
    half = 3.182446 * math.sqrt(0.002 / 3) / 2
    assert d.mean == pytest.approx(-0.01)
    assert (d.low, d.high) == pytest.approx((-0.01 - half, -0.01 + half), abs=1e-6)
    assert d.low == pytest.approx(-0.0511, abs=1e-4)  # just under -0.05: not non-inferior
    assert judge(arm, ref).change_met is False
    closer = {"1": _fig(0.29), "2": _fig(0.30), "3": _fig(0.31), "4": _fig(0.28)}
    assert judge(closer, ref).change_met  # half the spread: -0.005 [-0.0255, +0.0155]
    with pytest.raises(ValueError, match="common seeds: none"):
        judge({"9": _fig(0.3), "8": _fig(0.3)}, ref)


def test_the_floor_needs_twice_the_base_a_significant_gain_and_kept_validation() -> None:
    assert floor(_fig(0.25, wins=57, losses=5, val_first=0.047, val_last=0.25)).met
    short = floor(_fig(0.09, wins=20, losses=9))  # 0.09 < 2 x 0.047
    assert not short.met and "< 2x base" in short.why
    coin = floor(_fig(0.25, wins=30, losses=20))  # p = 0.20
    assert not coin.met and coin.p == pytest.approx(mcnemar_exact(30, 20))
    fell = floor(_fig(0.25, wins=57, losses=5, val_first=0.30, val_last=0.25))
    assert not fell.met and "validation 0.300 -> 0.250" in fell.why
    # the flags are reported, never failing
    assert floor(_fig(0.25, wins=57, losses=5, flags=("length 21->9",))).met


def test_without_counts_the_floor_uses_the_worst_case_mcnemar() -> None:
    # 0.121 vs 0.047 on 256: net 19 wins; the base's 12 right answers bound the losses
    bound = mcnemar_bound(0.121, 0.047, 256)
    assert bound == max(mcnemar_exact(19 + c, c) for c in range(13))
    assert bound >= mcnemar_exact(19, 0)  # never below a case the accuracies allow
    verdict = floor(_fig(0.121))
    assert verdict.p_bounded and verdict.p == bound
    assert mcnemar_bound(0.05, 0.06, 256) == 1.0  # no gain: no evidence


def test_outcomes_count_per_problem_and_check_their_lengths() -> None:
    seed = SeedOutcomes(base=[1, 0, 0, 0], base_boxed=[1, 1, 0, 0], trained=[0, 1, 1, 1],
                        val_curve=[0.1, 0.5])  # fmt: skip
    fig = seed.figures()
    assert (fig.base, fig.base_boxed, fig.trained, fig.wins, fig.losses) == (0.25, 0.5, 0.75, 3, 1)
    assert (fig.val_first, fig.val_last) == (0.1, 0.5)
    with pytest.raises(ValueError, match="the same number; got 4, 3, 4"):
        SeedOutcomes(base=[0] * 4, base_boxed=[0] * 3, trained=[0] * 4)


def test_the_rendered_verdicts_name_what_missed() -> None:
    figs = {"1": _fig(0.30, wins=70, losses=3), "2": _fig(0.08, wins=12, losses=4)}
    text = render(judge(figs))
    assert "1/2 seeds missed by 2 (0.080 < 2x base 0.047" in text
    assert text.endswith("learning bar: missed")


def test_the_t_quantiles_match_the_tables() -> None:
    # Student's t table, two-sided 5%: df 1 12.706, df 8 2.306, df 30 2.042
    assert [round(student_t_quantile(0.975, df), 3) for df in (1, 8, 30)] == [12.706, 2.306, 2.042]

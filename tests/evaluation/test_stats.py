"""The evaluation statistics against hand-computed values (scipy is not installed here, so
the references are the formulas written out with exact fractions)."""

from __future__ import annotations

import doctest
import itertools
from fractions import Fraction
from math import comb

import pytest

from rollcli.evaluation import stats
from rollcli.evaluation.stats import mcnemar_exact, pass_at_k, wilson_interval


def test_doctests() -> None:
    assert doctest.testmod(stats).failed == 0


def test_pass_at_k_hand_computed() -> None:
    # n=10 samples, c=3 correct, k=4: 1 - C(7,4)/C(10,4) = 1 - 35/210 = 5/6
    assert pass_at_k(10, 3, 4) == pytest.approx(5 / 6, abs=1e-12)
    assert pass_at_k(10, 0, 4) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8, abs=1e-12)  # pass@1 = c / n


def test_pass_at_k_is_the_chance_a_random_k_subset_holds_a_correct_sample() -> None:
    """The estimator's definition, by enumerating every k-subset of the samples."""
    for n, c, k in [(5, 2, 2), (6, 1, 3), (7, 4, 5), (6, 3, 4)]:
        samples = [True] * c + [False] * (n - c)
        subsets = list(itertools.combinations(samples, k))
        expected = Fraction(sum(any(s) for s in subsets), len(subsets))
        assert pass_at_k(n, c, k) == pytest.approx(float(expected), abs=1e-12)


def test_pass_at_k_is_stable_for_many_samples() -> None:
    # C(1000, 500) overflows a float; the product form does not form it
    expected = 1 - Fraction(comb(900, 500), comb(1000, 500))
    assert pass_at_k(1000, 100, 500) == pytest.approx(float(expected), abs=1e-12)


def test_pass_at_k_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(4, 5, 1)


def test_mcnemar_exact_hand_computed() -> None:
    # b=2, c=8: 2 * P[Bin(10, 1/2) <= 2] = 2 * (1 + 10 + 45) / 1024 = 112/1024
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024, abs=1e-15)
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)  # symmetric
    assert mcnemar_exact(3, 3) == 1.0  # capped at 1
    assert mcnemar_exact(0, 1) == 1.0  # 2 * 1/2
    # b=0, c=10: 2 / 1024
    assert mcnemar_exact(0, 10) == pytest.approx(2 / 1024, abs=1e-15)


def test_wilson_interval_hand_computed() -> None:
    # 50/100: centre 0.5, half-width 1.96 * sqrt(0.0025 + 1.96^2/40000) / (1 + 1.96^2/100)
    low, high = wilson_interval(50, 100)
    half = 1.96 * (0.0025 + 1.96**2 / 40000) ** 0.5 / (1 + 1.96**2 / 100)
    assert (low, high) == pytest.approx((0.5 - half, 0.5 + half), abs=1e-12)
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0


def test_sign_flip_p_exact_and_monte_carlo() -> None:
    from rollcli.evaluation.stats import sign_flip_p

    # [3, -1, 2, 0.5]: |sum| = 4.5; of the 16 sign patterns, those with |sum| >= 4.5 are
    # +3 +1 +2 (+-0.5): sums 6.5, 5.5 and their negatives, and +3 -1 +2 +0.5 = 4.5, negated:
    # 6 patterns of 16
    assert sign_flip_p([3.0, -1.0, 2.0, 0.5]) == pytest.approx(6 / 16)
    assert sign_flip_p([0.0, 3.0, -1.0, 2.0, 0.5]) == pytest.approx(6 / 16)  # zeros drop out
    # 20 equal differences: exactly 2 / 2^20; Monte Carlo finds (almost) none of them
    p = sign_flip_p([1.0] * 20, draws=50_000)
    assert 1 / 50_001 <= p <= 5 / 50_001
    # a balanced sample: no evidence
    assert sign_flip_p([1.0, -1.0] * 15, draws=20_000) == pytest.approx(1.0, abs=1e-4)
    assert sign_flip_p([1.0] * 20, draws=50_000, seed=3) == sign_flip_p(
        [1.0] * 20, draws=50_000, seed=3
    )  # seeded

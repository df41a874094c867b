"""The statistics `roll eval` and validation report: a success rate's Wilson interval,
the unbiased pass@k estimator, the exact McNemar test for two models on the same items, and
for per-item scores (an episode's return) the paired mean difference with its interval and
sign-flip test; Student's t for a mean over seeds (the learning bar).

Pure functions of counts, each with hand-checkable examples.
"""

from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a success rate (95% by default).

    >>> [round(x, 3) for x in wilson_interval(8, 10)]
    [0.49, 0.943]
    >>> wilson_interval(0, 0)
    (0.0, 1.0)
    """
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from `n` samples of which `c` are correct
    (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"):
    `1 - C(n - c, k) / C(n, k)`, computed as the product `prod_{i=n-c+1}^{n} (1 - k / i)`,
    which never forms the large binomials.

    >>> round(pass_at_k(5, 2, 2), 12)  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    0.7
    >>> pass_at_k(4, 1, 1)  # pass@1 is the fraction correct
    0.25
    >>> pass_at_k(3, 2, 2)  # fewer than k wrong samples: every k-subset has a correct one
    1.0
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for paired binary outcomes: `b` items only the
    first model got right, `c` only the second. Under the null each discordant pair is a
    fair coin, so `p = min(1, 2 * P[X <= min(b, c)])` with `X ~ Binomial(b + c, 1/2)`.

    >>> mcnemar_exact(0, 0)  # no discordant pair: no evidence either way
    1.0
    >>> mcnemar_exact(0, 5)  # 2 * (1/2)^5
    0.0625
    >>> round(mcnemar_exact(1, 9), 6)  # 2 * (1 + 10) / 2^10
    0.021484
    """
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact needs non-negative counts (b={b}, c={c})")
    n = b + c
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def mean_difference_interval(diffs: list[float], z: float = 1.96) -> tuple[float, float]:
    """The normal-approximation 95% interval of the mean of paired differences.

    >>> # mean 2.5, sd sqrt(5 / 3), half-width 1.96 * sd / 2 = 1.2652
    >>> [round(x, 4) for x in mean_difference_interval([1.0, 2.0, 3.0, 4.0])]
    [1.2348, 3.7652]
    """
    n = len(diffs)
    if n < 2:
        raise ValueError(f"an interval of a mean difference needs 2 or more items, not {n}")
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
    half = z * sd / math.sqrt(n)
    return mean - half, mean + half


def sign_flip_p(diffs: list[float], draws: int = 200_000, seed: int = 0) -> float:
    """Two-sided p-value of "the mean paired difference is 0" by the paired randomisation
    test: under the null each difference's sign is a fair coin. Exact (all `2^n` sign
    patterns) for up to 16 non-zero differences, else Monte Carlo with `draws` seeded
    draws and `p = (1 + hits) / (1 + draws)`.

    >>> sign_flip_p([1.0, 2.0, 3.0])  # |sum| >= 6 only for +++ and ---: 2 of 8
    0.25
    >>> sign_flip_p([0.0, 0.0])  # no difference: no evidence either way
    1.0
    """
    import numpy as np

    d = np.array([x for x in diffs if x != 0.0], dtype=np.float64)
    if len(d) == 0:
        return 1.0
    observed = abs(d.sum()) - 1e-12 * np.abs(d).sum()  # ties with the observed sum count
    if len(d) <= 16:
        signs = 1 - 2 * ((np.arange(2 ** len(d))[:, None] >> np.arange(len(d))) & 1)
        return float((np.abs(signs @ d) >= observed).mean())
    rng = np.random.default_rng(seed)
    hits, left = 0, draws
    while left:
        chunk = min(left, 20_000)
        signs = rng.integers(0, 2, size=(chunk, len(d))) * 2 - 1
        hits += int((np.abs(signs @ d) >= observed).sum())
        left -= chunk
    return (1 + hits) / (1 + draws)


def student_t_sf2(t: float, df: int) -> float:
    """Two-sided tail `P(|T| >= |t|)` of Student's t with `df` degrees of freedom: the
    regularized incomplete beta `I_{df / (df + t^2)}(df / 2, 1 / 2)` (mpmath's `betainc`).

    >>> round(student_t_sf2(3.182446, 3), 4)  # the 97.5% quantile of t(3)
    0.05
    >>> student_t_sf2(0.0, 5)
    1.0
    """
    import mpmath

    x = df / (df + t * t)
    return float(mpmath.betainc(df / 2, 0.5, 0, x, regularized=True))


def student_t_quantile(q: float, df: int) -> float:
    """The `q` quantile (0.5 < q < 1) of Student's t with `df` degrees of freedom, by
    bisection on `student_t_sf2`.

    >>> round(student_t_quantile(0.975, 3), 4), round(student_t_quantile(0.975, 8), 4)
    (3.1824, 2.306)
    """
    if not 0.5 < q < 1:
        raise ValueError(f"student_t_quantile takes 0.5 < q < 1, not {q}")
    low, high = 0.0, 1e6
    for _ in range(200):
        mid = (low + high) / 2
        if student_t_sf2(mid, df) / 2 > 1 - q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def t_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """`(mean, low, high, p)`: the mean of `values`, its `level` t-interval and the
    two-sided one-sample t-test's p against a mean of 0 (`n - 1` degrees of freedom).

    >>> # mean 2.5, sd sqrt(5/3), se 0.6455, t = 3.873, t(3) 97.5% 3.1824
    >>> [round(x, 4) for x in t_interval([1.0, 2.0, 3.0, 4.0])]
    [2.5, 0.4457, 4.5543, 0.0305]
    """
    n = len(values)
    if n < 2:
        raise ValueError(f"a t-interval needs 2 or more values, not {n}")
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    se = sd / math.sqrt(n)
    half = student_t_quantile(0.5 + level / 2, n - 1) * se
    if se == 0:
        p = 1.0 if mean == 0 else 0.0
    else:
        p = student_t_sf2(mean / se, n - 1)
    return mean, mean - half, mean + half, p

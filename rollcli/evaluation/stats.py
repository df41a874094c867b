"""The statistics `roll eval` and validation report: a success rate's Wilson interval,
the unbiased pass@k estimator, and the exact McNemar test for two models on the same items.

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

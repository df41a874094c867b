"""A paired comparison of two models on the same items (problems or episode seeds): both
success rates and the exact McNemar test on the items where exactly one model succeeded;
given per-item scores (episode returns), also the mean difference with its 95% interval
and the paired sign-flip test, for envs judged by mean reward (WebShop)."""

from __future__ import annotations

from typing import Any

from rollcli.evaluation.stats import (
    mcnemar_exact,
    mean_difference_interval,
    sign_flip_p,
    wilson_interval,
)


def paired_comparison(
    first: list[bool],
    second: list[bool],
    scores: tuple[list[float], list[float]] | None = None,
) -> dict[str, Any]:
    """Outcomes of two models on the same items, in the same order (and, with `scores`,
    each item's score under each model).

    >>> c = paired_comparison([True, True, False, True], [True, False, False, False])
    >>> c["only_first"], c["only_second"], c["both"], c["neither"], c["p_value"]
    (2, 0, 1, 1, 0.5)
    >>> s = paired_comparison([True] * 3, [True] * 3, ([1.0, 2.0, 3.0], [0.0, 0.0, 0.0]))
    >>> s["score_difference"], s["score_p_value"]
    (2.0, 0.25)
    """
    if len(first) != len(second):
        raise ValueError(f"paired outcomes need the same items ({len(first)} vs {len(second)})")
    if scores is not None and not len(scores[0]) == len(scores[1]) == len(first):
        raise ValueError("paired scores need one score per item and model")
    n = len(first)
    b = sum(x and not y for x, y in zip(first, second, strict=True))
    c = sum(y and not x for x, y in zip(first, second, strict=True))
    both = sum(x and y for x, y in zip(first, second, strict=True))
    out = {
        "items": n,
        "first_rate": sum(first) / n,
        "first_ci95": list(wilson_interval(sum(first), n)),
        "second_rate": sum(second) / n,
        "second_ci95": list(wilson_interval(sum(second), n)),
        "both": both,
        "only_first": b,
        "only_second": c,
        "neither": n - both - b - c,
        "p_value": mcnemar_exact(b, c),
    }
    if scores is not None and n >= 2:
        diffs = [x - y for x, y in zip(*scores, strict=True)]
        out.update(
            {
                "first_mean_score": sum(scores[0]) / n,
                "second_mean_score": sum(scores[1]) / n,
                "score_difference": sum(diffs) / n,
                "score_difference_ci95": list(mean_difference_interval(diffs)),
                "score_p_value": sign_flip_p(diffs),
            }
        )
    return out


def render_paired(first: str, second: str, comparison: dict[str, Any], what: str) -> str:
    """The paired table for the terminal."""
    c = comparison
    width = max(len(first), len(second), 12)
    lo1, hi1 = c["first_ci95"]
    lo2, hi2 = c["second_ci95"]
    return "\n".join(
        [
            f"paired comparison on the same {c['items']} {what}",
            f"  {first:<{width}}  {c['first_rate']:.3f}  (95% CI {lo1:.3f}-{hi1:.3f})",
            f"  {second:<{width}}  {c['second_rate']:.3f}  (95% CI {lo2:.3f}-{hi2:.3f})",
            f"  only {first} right: {c['only_first']} · only {second} right: "
            f"{c['only_second']} · both: {c['both']} · neither: {c['neither']}",
            f"  exact McNemar p = {c['p_value']:.4g}"
            + ("  (no discordant items)" if c["only_first"] + c["only_second"] == 0 else ""),
            *_score_lines(first, second, c),
        ]
    )


def _score_lines(first: str, second: str, c: dict[str, Any]) -> list[str]:
    if "score_difference" not in c:
        return []
    lo, hi = c["score_difference_ci95"]
    return [
        f"  mean return {c['first_mean_score']:.3f} ({first}) vs "
        f"{c['second_mean_score']:.3f} ({second})",
        f"  difference {c['score_difference']:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}), "
        f"paired sign-flip p = {c['score_p_value']:.4g}",
    ]

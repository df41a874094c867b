"""StarPO-S group filtering by reward std: the kept groups against hand-made scores."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.algorithms.group_filter import group_reward_std, top_variance_groups


def _loop_reference(scores: list[float], n: int, frac: float) -> list[bool]:
    """The rule written as a plain loop: rank by std to 6 decimals (earlier group first on
    ties), take
    ceil(frac * G) places, drop the places held by groups with no spread."""
    groups = [scores[i : i + n] for i in range(0, len(scores), n)]
    stds = []
    for g in groups:
        mean = sum(g) / n
        stds.append(math.sqrt(sum((x - mean) ** 2 for x in g) / n))
    if frac == 1.0:
        return [True] * len(groups)
    ranked = sorted(range(len(groups)), key=lambda i: (-round(stds[i], 6), i))
    places = set(ranked[: math.ceil(frac * len(groups))])
    return [i in places and stds[i] > 1e-6 for i in range(len(groups))]


# 6 groups of 4 returns: stds by hand (population std)
SCORES = [
    [0.0, 0.0, 0.0, 0.0],  # g0: 0 (all alike)
    [1.0, 0.0, 0.0, 0.0],  # g1: sqrt(3)/4 = 0.4330
    [-0.1, -0.2, -0.1, -0.2],  # g2: 0.05 (a format-penalty difference)
    [1.0, 1.0, 0.0, 0.0],  # g3: 0.5
    [0.0, 0.0, 0.0, 1.0],  # g4: 0.4330, the same scores as g1 in another order
    [-0.1, -0.1, -0.1, -0.1],  # g5: 0
]
FLAT = torch.tensor([x for g in SCORES for x in g])


def test_group_std_by_hand_and_order_free() -> None:
    std = group_reward_std(FLAT, 4)
    assert std.tolist() == pytest.approx([0.0, 3**0.5 / 4, 0.05, 0.5, 3**0.5 / 4, 0.0], abs=1e-7)
    assert std[1].item() == std[4].item()  # the same bits: the tie is exact


@pytest.mark.parametrize(
    ("frac", "kept"),
    [
        (1 / 6, [3]),  # 1 place: the largest std
        (0.25, [1, 3]),  # ceil(1.5) = 2 places: g3, then g1 (ties g4, earlier group wins)
        (0.5, [1, 3, 4]),  # 3 places: g3, g1, g4
        (0.75, [1, 2, 3, 4]),  # 5 places: ... g2, then g0 (no spread: dropped)
        (0.99, [1, 2, 3, 4]),  # 6 places: g0 and g5 have no spread
        (1.0, [0, 1, 2, 3, 4, 5]),  # off: every group
    ],
)
def test_kept_groups_by_hand(frac: float, kept: list[int]) -> None:
    keep = top_variance_groups(FLAT, 4, frac)
    assert keep.nonzero().flatten().tolist() == kept
    assert keep.tolist() == _loop_reference(FLAT.tolist(), 4, frac)


def test_matches_the_loop_on_random_groups() -> None:
    gen = torch.Generator().manual_seed(0)
    for trial in range(50):
        n = 2 + trial % 4
        # few distinct values: many zero-spread groups and many ties, also between different
        # scores of equal spread ([0.5, 1, 1] and [0, 0, 0.5])
        scores = torch.randint(0, 3, (n * 7,), generator=gen).float() / 2
        frac = float(torch.rand((), generator=gen).clamp(min=0.05))
        got = top_variance_groups(scores, n, frac).tolist()
        assert got == _loop_reference(scores.tolist(), n, frac), (scores, n, frac)


def test_nothing_kept_when_no_group_has_spread() -> None:
    assert not top_variance_groups(torch.tensor([1.0, 1.0, -0.1, -0.1]), 2, 0.5).any()


@pytest.mark.parametrize("frac", [0.0, -0.5, 1.5])
def test_fraction_out_of_range_is_refused(frac: float) -> None:
    with pytest.raises(ValueError, match="keep_frac must be in"):
        top_variance_groups(FLAT, 4, frac)

"""The prompt scheduler's step metrics: `reward/*` over every sample the step generated,
groups dynamic sampling dropped included; `reward/kept_mean` over the batch that trains."""

from __future__ import annotations

import pytest

from rollcli.rollout.prompt_scheduler import _metrics
from rollcli.rollout.result import build_batch
from rollcli.rollout.rows import GenerationRow, ScoredRequest


def test_reward_mean_covers_the_dropped_groups_too() -> None:
    # one request, groups of 2: group 0 scores [1, 0] (kept), group 1 [1, 1] (dropped: no
    # variance). All samples: mean 0.75, unbiased std sqrt(0.75 / 3) = 0.5; kept mean 0.5.
    scores = [1.0, 0.0, 1.0, 1.0]
    gens = tuple(GenerationRow(i // 2, [5, 6], "x", True) for i in range(4))
    results = tuple({"score": s, "correct": s} for s in scores)
    done = ScoredRequest(False, 0.0, 1.0, gens, results, ((0.0, 0.1),) * 4)
    batch = build_batch([[1, 2]] * 2, [[5, 6]] * 2, scores[:2], [True] * 2, 0, {})
    metrics = _metrics(batch, [done], dropped=1, aborted=0, rounds=0)
    assert metrics["reward/mean"] == pytest.approx(0.75)
    assert metrics["reward/std"] == pytest.approx(0.5)
    assert metrics["reward/correct"] == pytest.approx(0.75)
    assert metrics["reward/kept_mean"] == pytest.approx(0.5)
    assert metrics["rollout/dropped_groups"] == 1.0

"""A prompt rollout's step metrics (`rollout/rollout_metrics.py`): `reward/*` over every
sample the step scored, groups dynamic sampling dropped included; `reward/kept_mean` over
the batch that trains; `rollout/rows_busy` from the requests' decode occupancy."""

from __future__ import annotations

import pytest

from rollcli.rollout.result import build_batch
from rollcli.rollout.rollout_metrics import rollout_metrics


def test_reward_mean_covers_the_dropped_groups_too() -> None:
    # groups of 2: group 0 scores [1, 0] (kept), group 1 [1, 1] (dropped: no variance). All
    # samples: mean 0.75, unbiased std sqrt(0.75 / 3) = 0.5; kept mean 0.5.
    scores = [1.0, 0.0, 1.0, 1.0]
    results = [{"score": s, "correct": s} for s in scores]
    batch = build_batch([[1, 2]] * 2, [[5, 6]] * 2, scores[:2], [True] * 2, 0, {})
    metrics = rollout_metrics(batch, results, 8, [(0.0, 2.0)], [(0.0, 0.1)] * 4, [(30, 40)])
    assert metrics["reward/mean"] == pytest.approx(0.75)
    assert metrics["reward/std"] == pytest.approx(0.5)
    assert metrics["reward/correct"] == pytest.approx(0.75)
    assert metrics["reward/kept_mean"] == pytest.approx(0.5)
    assert metrics["rollout/tokens_per_s"] == pytest.approx(4.0)
    assert metrics["rollout/rows_busy"] == pytest.approx(0.75)


def test_a_step_that_sent_no_request_logs_no_throughput() -> None:
    """A partial step whose groups had all ended in earlier rollouts."""
    batch = build_batch([[1, 2]] * 2, [[5, 6]] * 2, [1.0, 0.0], [True] * 2, 0, {})
    metrics = rollout_metrics(batch, [], 0, [], [], [])
    assert metrics["rollout/tokens_per_s"] == 0.0 and "rollout/rows_busy" not in metrics

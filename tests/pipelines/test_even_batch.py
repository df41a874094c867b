"""`RLPipeline.even_batch`: with N data-parallel ranks, a batch that dynamic sampling or a
group filter left short still splits over the ranks, in whole groups (the step used to end
in `shard_order`'s ValueError when fewer rows than one split were left)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rollcli.data.batch import Batch
from rollcli.distributed import data_parallel
from rollcli.pipelines.rl.pipeline import RLPipeline


def _pipeline(world_size: int, group_size: int) -> tuple[RLPipeline, list[str]]:
    events: list[str] = []
    pipeline = object.__new__(RLPipeline)  # only what even_batch reads
    pipeline.clusters = SimpleNamespace(actor_train=SimpleNamespace(world_size=world_size))
    pipeline.source = SimpleNamespace(group_size=group_size)
    pipeline.run = SimpleNamespace(log_event=events.append)
    return pipeline, events


def _batch(groups: int, group_size: int) -> Batch:
    rows = groups * group_size
    ids = [f"p{i // group_size}" for i in range(rows)]
    return Batch({"scores": torch.arange(rows, dtype=torch.float32)}, {"prompt_id": ids}, {})


@pytest.mark.parametrize(
    ("world_size", "group_size", "groups", "mini", "rows", "dropped", "repeated"),
    [
        (2, 3, 1, None, 6, 0, 3),  # one group of 3 over 2 ranks: crashed
        (4, 2, 1, 4, 4, 0, 2),  # one group of 2 over 4 ranks: crashed
        (8, 4, 1, None, 8, 0, 4),
        (4, 2, 3, 4, 4, 2, 0),  # 6 rows over 4 ranks: the last group goes
        (2, 3, 3, 6, 6, 3, 0),
        (2, 4, 3, None, 12, 0, 0),  # splits already
    ],
)
def test_a_short_batch_splits_over_the_ranks_in_whole_groups(
    world_size, group_size, groups, mini, rows, dropped, repeated
) -> None:
    pipeline, events = _pipeline(world_size, group_size)
    batch, metrics = pipeline.even_batch(_batch(groups, group_size))
    assert len(batch) == rows
    assert metrics == {
        "rollout/dp_dropped_rows": float(dropped),
        "rollout/dp_repeated_rows": float(repeated),
    }
    assert bool(events) == bool(dropped or repeated)
    ids = batch.fields["prompt_id"]
    for start in range(0, rows, group_size):  # whole groups, contiguous
        assert len(set(ids[start : start + group_size])) == 1
    assert len(data_parallel.shard_order(rows, mini, world_size)) == rows  # no ValueError


def test_one_rank_takes_the_batch_as_it_is() -> None:
    pipeline, events = _pipeline(1, 3)
    batch = _batch(1, 3)
    assert pipeline.even_batch(batch) == (batch, {}) and not events


def test_even_rows_repeats_or_drops_whole_groups() -> None:
    assert data_parallel.even_rows(3, 3, 2) == [0, 1, 2, 0, 1, 2]
    assert data_parallel.even_rows(6, 2, 4) == [0, 1, 2, 3]
    assert data_parallel.even_rows(4, 2, 8) == [0, 1, 2, 3, 0, 1, 2, 3]

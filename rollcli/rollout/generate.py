"""Plain generation on actor_infer (every rank, with progress) and scoring on reward: the
held-out validation of the RLVR pipeline. A training step's rollout goes through the prompt
scheduler (`prompt_scheduler.py`) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollcli.data.batch import chunk_bounds
from rollcli.distributed.calls import get, unfinished
from rollcli.distributed.cluster import Cluster
from rollcli.rollout.rows import GenerationRow
from rollcli.rollout.worker_api import InferenceWorker, Scorer
from rollcli.strategies.hf_infer import SamplingParams

ProgressFn = Callable[[int, int], None]
PhaseFn = Callable[[str], None]


def generate(
    infer: Cluster,
    prompt_ids: list[list[int]],
    params: SamplingParams,
    on_progress: ProgressFn | None,
) -> list[GenerationRow]:
    """Generate on every actor_infer rank (prompts split across ranks), polling progress."""
    refs = infer.dispatch_async(InferenceWorker.generate, prompt_ids, params=params)
    offsets = [start for start, _ in chunk_bounds(len(prompt_ids), infer.world_size)]
    pending = list(refs)
    while pending:
        pending = unfinished(pending, timeout=0.5)
        if on_progress is not None:
            progress = infer.poll(InferenceWorker.progress)
            done = sum(p[0] for p in progress)
            total = sum(p[1] for p in progress) or 1
            on_progress(done if pending else total, total)
    results = get(refs)
    return [
        GenerationRow.from_wire(row, offset)
        for offset, part in zip(offsets, results, strict=True)
        for row in part
    ]


def score(reward: Cluster, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return reward.dispatch(Scorer.score, samples)

"""Rollout pieces: generation on actor_infer (with progress), scoring on reward, and the
training layout of scored samples (see `rollcli.data.padding`). A training step's rollout
is scheduled by `rollout_scheduler.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from rollcli.data.batch import Batch, chunk_bounds
from rollcli.data.padding import rollout_tensors
from rollcli.distributed.cluster import Cluster
from rollcli.strategies.hf_infer import SamplingParams

ProgressFn = Callable[[int, int], None]
PhaseFn = Callable[[str], None]


@dataclass
class RolloutResult:
    batch: Batch
    rows: list[dict[str, Any]]
    metrics: dict[str, float]

    def to_plain(self) -> dict[str, Any]:
        """Tensors and plain data only (a checkpoint loads it with `weights_only=True`)."""
        b = self.batch
        return {"tensors": b.tensors, "fields": b.fields, "meta": b.meta, "rows": self.rows,
                "metrics": self.metrics}  # fmt: skip

    @classmethod
    def from_plain(cls, state: dict[str, Any]) -> RolloutResult:
        batch = Batch(state["tensors"], state["fields"], state["meta"])
        return cls(batch, state["rows"], state["metrics"])


def generate(
    infer: Cluster,
    prompt_ids: list[list[int]],
    params: SamplingParams,
    on_progress: ProgressFn | None,
) -> list[dict]:
    """Generate on every actor_infer rank (prompts split across ranks), polling progress."""
    import ray

    refs = infer.dispatch_async("generate", prompt_ids, params=params)
    offsets = [start for start, _ in chunk_bounds(len(prompt_ids), infer.world_size)]
    pending = list(refs)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        if on_progress is not None:
            progress = infer.poll("progress")
            done = sum(p[0] for p in progress)
            total = sum(p[1] for p in progress) or 1
            on_progress(done if pending else total, total)
    results = ray.get(refs)
    out = []
    for offset, part in zip(offsets, results, strict=True):
        for gen in part:
            gen["prompt_index"] += offset
            out.append(gen)
    return out


def score(reward: Cluster, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return reward.dispatch("score", samples)


def build_batch(
    prompt_ids: list[list[int]],
    response_ids: list[list[int]],
    scores: list[float],
    finished: list[bool],
    pad_id: int,
    fields: dict[str, list[Any]],
) -> Batch:
    """The training layout of samples, re-padded to one width whatever request each came
    from; `fields` are per-sample lists (`behaviour_logprobs`, when given, becomes a tensor
    laid out like the responses)."""
    tensors = rollout_tensors(prompt_ids, response_ids, pad_id)
    tensors["scores"] = torch.tensor(scores, dtype=torch.float32)
    tensors["finished"] = torch.tensor(finished, dtype=torch.bool)
    fields = dict(fields)
    behaviour_rows = fields.pop("behaviour_logprobs", None)
    if behaviour_rows:
        behaviour = torch.zeros(len(response_ids), tensors["response_mask"].shape[1])
        for i, lp in enumerate(behaviour_rows):
            behaviour[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        tensors["behaviour_logprobs"] = behaviour
    return Batch(tensors, fields)

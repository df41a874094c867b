"""A training step's rollout as the pipeline gets it (`RolloutResult`: the batch, the
samples' rows, the rollout metrics) and the training layout of scored samples
(`build_batch`, see `rollcli.data.padding`). The prompt scheduler (`prompt_scheduler.py`)
builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    BEHAVIOUR_LOGPROBS,
    FINISHED,
    PROMPT_WIDTH,
    RESPONSE_MASK,
    ROUTED_EXPERTS,
    SCORES,
)
from rollcli.data.padding import rollout_tensors


@dataclass
class RolloutResult:
    """A step's rollout from either source of the RL pipeline (prompts or episodes)."""

    batch: Batch | None  # None: nothing worth training on (every group scored alike)
    rows: list[dict[str, Any]]  # samples/step-N.jsonl
    metrics: dict[str, float]
    summary: str | None = None  # a line the display shows under the step (episodes: env stats)

    def to_plain(self) -> dict[str, Any]:
        """Tensors and plain data only (a checkpoint loads it with `weights_only=True`)."""
        b = self.batch
        batch = None if b is None else {"tensors": b.tensors, "fields": b.fields, "meta": b.meta}
        return {"batch": batch, "rows": self.rows, "metrics": self.metrics, "summary": self.summary}

    @classmethod
    def from_plain(cls, state: dict[str, Any]) -> RolloutResult:
        if "batch" not in state:  # saved before episodes could be played ahead
            state = {"batch": {k: state[k] for k in ("tensors", "fields", "meta")}, **state}
        b = state["batch"]
        batch = None if b is None else Batch(b["tensors"], b["fields"], b["meta"])
        return cls(batch, state["rows"], state["metrics"], state.get("summary"))


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
    laid out like the responses; `routed_experts`, an MoE sampler's `[P + R, layers, k]` per
    sample, one laid out like the rows)."""
    tensors = rollout_tensors(prompt_ids, response_ids, pad_id)
    tensors[SCORES] = torch.tensor(scores, dtype=torch.float32)
    tensors[FINISHED] = torch.tensor(finished, dtype=torch.bool)
    fields = dict(fields)
    behaviour_rows = fields.pop(BEHAVIOUR_LOGPROBS, None)
    if behaviour_rows:
        behaviour = torch.zeros(len(response_ids), tensors[RESPONSE_MASK].shape[1])
        for i, lp in enumerate(behaviour_rows):
            behaviour[i, : len(lp)] = torch.tensor(lp, dtype=torch.float32)
        tensors[BEHAVIOUR_LOGPROBS] = behaviour
    routing = fields.pop(ROUTED_EXPERTS, None)
    if routing:
        width = int(tensors[PROMPT_WIDTH][0])
        tensors[ROUTED_EXPERTS] = routing_rows(routing, prompt_ids, width, tensors["input_ids"])
    return Batch(tensors, fields)


def routing_rows(
    routing: list[torch.Tensor], prompt_ids: list[list[int]], width: int, ids: torch.Tensor
) -> torch.Tensor:
    """Per-sample routing records (`[P_i + R_i, layers, k]`) laid out like the rows
    `[prompt left-padded to width | response]`, UNSET (-1) on the padding."""
    first = routing[0]
    out = torch.full((*ids.shape, *first.shape[1:]), -1, dtype=first.dtype)
    for i, (r, p) in enumerate(zip(routing, prompt_ids, strict=True)):
        out[i, width - len(p) : width - len(p) + len(r)] = r
    return out

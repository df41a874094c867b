"""What the RL pipeline needs from a rollout source (`PromptSource`, `EpisodeSource`).

A source turns step `n` into a `RolloutResult`: the batch to train on, in the rollout
layout of `rollcli.data.padding` (rows of `group_size` contiguous samples that share a
prompt or an env seed, `scores` per row; an optional `advantages.STEP_ADVANTAGES` tensor,
GiGPO's step-level term, is added to the advantages), the rows of `samples/step-n.jsonl` and the
rollout's metrics. Everything after the rollout (log-probs, values, advantages, update,
weight sync) is the pipeline's, the same for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rollcli.config.sections import RolloutConfig
from rollcli.rollout.result import RolloutResult
from rollcli.strategies.sampling import SamplingParams

if TYPE_CHECKING:
    from rollcli.runtime.workers_setup import Clusters


class RolloutSource(Protocol):
    group_size: int  # contiguous rows that form a group in every batch
    batch_size: int  # rows a full step trains on (the on-policy mini-batch)
    flop_account: bool  # whether `tracking.step_perf` counts this source's FLOPs exactly

    def load(self, tokenizer: Any) -> None:
        """Before workers start: data or environments (bad input fails here)."""

    def attach(self, clusters: Clusters, version: int) -> None:
        """Workers (re)started: keep the clusters the source plays on; `version` is the
        weight version the engine holds."""

    def rollout(self, step: int) -> RolloutResult:
        """Step `step`'s rollout (`batch` None: nothing to train on this step)."""

    def validate(self) -> dict[str, float]:
        """The held-out metrics (`val/*`), greedy."""

    def describe(self) -> str:
        """What the source plays, for the "workers ready" event."""

    def before_sync(self, version: int) -> None:
        """The engine is about to get the weights after step `version` (async episodes
        played ahead finish first)."""

    def state_dict(self) -> dict[str, Any]:
        """JSON-able driver state (e.g. the prompt sampler) for a checkpoint."""

    def files(self) -> dict[str, Any] | None:
        """Checkpoint files (name -> picklable object), e.g. rollouts started ahead."""

    def load_state_dict(self, state: dict[str, Any] | None, checkpoint: Path | None) -> None:
        """Back to the start (None) or to a checkpoint's state and files."""


def step_sampling(rollout: RolloutConfig, seed: int, step: int, n: int) -> SamplingParams:
    """Step `step`'s sampling: `n` samples per request, seeded by the run seed and the step
    (so a resumed run samples what the uninterrupted one did)."""
    return SamplingParams(
        n=n,
        max_new_tokens=rollout.max_new_tokens,
        temperature=rollout.temperature,
        top_p=rollout.top_p,
        top_k=rollout.top_k,
        seed=seed * 100_003 + step,
    )

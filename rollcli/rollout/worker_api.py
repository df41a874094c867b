"""The workers as the rollout calls them: the methods of actor_infer, the env workers and
the reward workers that `rollout/` names (by reference, `distributed/calls.py`), without
importing the worker classes (they live in a layer above). `ActorInferWorker`, `EnvWorker`
and `RewardWorker` implement these Protocols; a test checks that each method exists there
with the same parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rollcli.strategies.sampling import PoolSample, SamplingParams


class InferenceWorker(Protocol):
    """actor_infer (`workers/actor_infer.py`)."""

    def generate(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        on_row: Callable[[int, dict], None] | None = None,
        sessions: list[str] | None = None,
        end_sessions: list[str] | None = None,
    ) -> list[dict]: ...

    def generate_request(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        request_id: str = "",
        reward: list | None = None,
        meta: list[dict] | None = None,
        pool: list[PoolSample] | None = None,
        until_groups: int | None = None,
    ) -> dict: ...

    def abort(self, request_ids: list[str]) -> None: ...

    def progress(self) -> tuple[int, int]: ...

    def end_sessions(self, session_ids: list[str]) -> None: ...


class EnvHost(Protocol):
    """An env worker (`workers/env_worker.py`)."""

    def reset(self, items: list[tuple[int, int]]) -> dict[int, dict[str, Any]]: ...

    def step(self, replies: dict[int, str]) -> dict[int, dict[str, Any]]: ...

    def release(self, slots: list[int]) -> None: ...


class Scorer(Protocol):
    """A reward worker (`workers/reward.py`)."""

    def score(self, samples: list[dict[str, Any]]) -> list[dict[str, Any]]: ...

    def score_sample(self, sample: dict[str, Any]) -> dict: ...

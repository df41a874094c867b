"""What a generation request brings back from actor_infer, typed where it arrives.

actor_infer answers in plain dicts, the wire format every engine and worker shares
(`rollcli.workers.generation.generation_row` for each sample; `generate_request` for a
scheduled request, with refs to its samples' reward results). `GenerationRow.from_wire` and
`ScoredRequest.from_wire` turn them into these rows: the one place the rollout code reads
those dicts, so the prompt scheduler and the pipelines read fields, not string keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GenerationRow:
    """One sampled response: its tokens and text, whether it ended (EOS or a stop token)
    rather than running out of `max_new_tokens`, and the log-prob of each sampled token when
    the engine returned them (the behaviour policy's)."""

    prompt_index: int  # the prompt's place in the request (or the `generate` call)
    token_ids: list[int]
    text: str
    finished: bool
    logprobs: list[float] | None = None
    cached_tokens: int = 0  # leading prompt tokens the engine did not prefill (sessions)
    routed_experts: Any = None  # an MoE model's experts per token, `[P + R, layers, k]`
    paused: bool = False  # a partial rollout's call stopped before it ended (continued later)

    @classmethod
    def from_wire(cls, row: dict[str, Any], offset: int = 0) -> GenerationRow:
        """A worker's row, its `prompt_index` moved by `offset` (the first prompt the worker
        was sent). A key this class does not know fails here, not later."""
        return cls(**{**row, "prompt_index": row["prompt_index"] + offset})


@dataclass(frozen=True)
class ScoredRequest:
    """A request that ran to the end, with each sample's reward result and the wall-clock
    interval the reward took (`reward_spans`), in row order; or an aborted one, with no
    samples. `gen_start`/`gen_end` is the interval actor_infer spent on it."""

    aborted: bool
    gen_start: float
    gen_end: float
    gens: tuple[GenerationRow, ...] = ()
    # each sample's reward result; None for a sample a partial request paused (unscored)
    results: tuple[dict[str, Any] | None, ...] = ()
    reward_spans: tuple[tuple[float, float], ...] = ()
    occupancy: tuple[int, int] | None = None  # the hf engine's (busy row-steps, row slots)

    @classmethod
    def from_wire(
        cls, done: dict[str, Any], scored: list[dict[str, Any] | None] | None
    ) -> ScoredRequest:
        """`done`: `generate_request`'s answer; `scored`: its `scores` refs fetched (each
        reward worker's `score_sample` answer, `{"result", "start", "end"}`; None for a
        paused sample), None when the request was aborted."""
        occupancy = tuple(done["occupancy"]) if done.get("occupancy") else None
        if done["aborted"]:
            return cls(True, done["gen_start"], done["gen_end"], occupancy=occupancy)
        if scored is None:
            raise ValueError("a finished request needs its samples' scores")
        pairs = list(zip(done["gens"], scored, strict=True))
        return cls(
            aborted=False,
            gen_start=done["gen_start"],
            gen_end=done["gen_end"],
            gens=tuple(GenerationRow.from_wire(g) for g, _ in pairs),
            results=tuple(None if s is None else s["result"] for _, s in pairs),
            reward_spans=tuple((s["start"], s["end"]) for _, s in pairs if s is not None),
            occupancy=occupancy,
        )

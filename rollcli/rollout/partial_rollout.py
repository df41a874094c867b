"""Partial rollouts (`rollout.partial`): a step trains on the groups that have ended, and the
samples still decoding are paused, not aborted: they continue in a later rollout, under
newer weights, from the token ids they have.

    the pool: groups in flight, oldest first (a group: one prompt's `group_size` samples)
    → a rollout drops the groups whose oldest token would train too stale
      (`max_staleness`, `rollout/dropped_stale`), tops the pool up with new prompts to twice
      the step's groups, and sends the groups with samples left as one request per
      actor_infer rank: continuous batching, the older groups' samples first, the call
      stopping once its share of groups has ended (`hf_continuous.py`)
    → every new token records the policy version that sampled it and its behaviour
      log-prob; a sample is scored the moment it ends
    → the ended groups, oldest first, are the step's (dynamic sampling drops those whose
      rewards agree and asks again, at most `max_resample_rounds` times); the rest stay

The stop is counted in decode steps, never in seconds, so a run repeats exactly whatever the
timing; the pool is part of a checkpoint (`PartialPool.to_plain`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from rollcli.algorithms.dapo import groups_with_variance
from rollcli.data.batch_keys import BEHAVIOUR_LOGPROBS, ROUTED_EXPERTS
from rollcli.data.prompts import Prompt
from rollcli.distributed.calls import get, unfinished
from rollcli.rollout.prompt_scheduler import (
    PhaseFn,
    ProgressFn,
    RolloutScheduler,
    SchedulerOptions,
    fetch_scores,
    sample_fields,
)
from rollcli.rollout.result import RolloutResult, build_batch
from rollcli.rollout.rollout_metrics import rollout_metrics
from rollcli.rollout.rows import ScoredRequest
from rollcli.rollout.worker_api import InferenceWorker
from rollcli.strategies.sampling import PoolSample, SamplingParams

POOL_GROUPS = 2  # groups in flight per group a step trains on


@dataclass
class PartialSample:
    """One sample across the calls that decode it. `versions[i]`: the policy version that
    sampled token i; `logprobs[i]`: its behaviour log-prob under that version."""

    sample: int  # which of its group's samples
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    routed_experts: torch.Tensor | None = None  # an MoE engine's record so far
    text: str = ""
    ended: bool = False
    finished: bool = False  # ended with EOS or a stop token (not the token limit)
    result: dict[str, Any] | None = None  # the reward's answer, once ended
    calls: int = 0  # calls that decoded tokens of it (more than one: continued)

    @property
    def scored(self) -> dict[str, Any]:
        """The reward's answer of an ended sample."""
        if self.result is None:
            raise RuntimeError("a sample that has not ended has no reward yet")
        return self.result


@dataclass
class PartialGroup:
    prompt: Prompt
    prompt_ids: list[int]
    samples: list[PartialSample]

    @property
    def ended(self) -> bool:
        return all(s.ended for s in self.samples)

    def oldest(self) -> int | None:
        """The version of its oldest token (None before any)."""
        versions = [s.versions[0] for s in self.samples if s.versions]
        return min(versions) if versions else None


class PartialPool:
    """The groups in flight between steps, oldest first."""

    def __init__(self) -> None:
        self.groups: list[PartialGroup] = []

    def paused(self) -> int:
        """Samples started and not ended."""
        return sum(1 for g in self.groups for s in g.samples if s.token_ids and not s.ended)

    def to_plain(self) -> list[dict[str, Any]]:
        """Tensors and plain data only (a checkpoint loads it with `weights_only=True`)."""
        return [
            {
                "prompt": {**asdict(g.prompt), "messages": [dict(m) for m in g.prompt.messages]},
                "prompt_ids": g.prompt_ids,
                "samples": [asdict(s) for s in g.samples],
            }
            for g in self.groups
        ]

    @classmethod
    def from_plain(cls, state: list[dict[str, Any]]) -> PartialPool:
        pool = cls()
        for g in state:
            prompt = Prompt(**{**g["prompt"], "messages": tuple(g["prompt"]["messages"])})
            samples = [PartialSample(**s) for s in g["samples"]]
            pool.groups.append(PartialGroup(prompt, list(g["prompt_ids"]), samples))
        return pool


@dataclass
class _Request:
    groups: list[PartialGroup]
    samples: list[PartialSample]  # the request's pool, in order
    version: int
    ref: Any
    done: ScoredRequest | None = None
    new_tokens: int = 0  # sampled by this request's call


class PartialRollout:
    """A step's partial rollout, started (its requests sent) when built."""

    def __init__(
        self,
        scheduler: RolloutScheduler,
        params: SamplingParams,
        opts: SchedulerOptions,
        pool: PartialPool,
        train_version: int,
        max_staleness: int,
    ) -> None:
        """`train_version`: the weights the step trains (a token sampled by version v is
        `train_version - v` stale there)."""
        self.scheduler, self.params, self.opts, self.pool = scheduler, params, opts, pool
        self.train_version, self.max_staleness = train_version, max_staleness
        self.uid = scheduler.next_uid()
        self.requests: list[_Request] = []
        self.rounds = 0
        self.dropped_stale = 0
        kept = [g for g in pool.groups if not self._too_stale(g)]
        self.dropped_stale = sum(len(g.samples) for g in pool.groups if self._too_stale(g))
        pool.groups = kept
        self._send(opts.num_groups - sum(g.ended for g in pool.groups))

    def _too_stale(self, group: PartialGroup) -> bool:
        oldest = group.oldest()
        return oldest is not None and self.train_version - oldest > self.max_staleness

    def _send(self, need: int) -> None:
        """Top the pool up with new prompts and send its groups with samples left, one
        request per actor_infer rank, each stopping once its share of `need` groups ended."""
        opts, pool = self.opts, self.pool
        missing = POOL_GROUPS * opts.num_groups - len(pool.groups)
        if missing > 0:
            prompts, ids = self.scheduler.draw(missing)
            for prompt, prompt_ids in zip(prompts, ids, strict=True):
                samples = [PartialSample(s) for s in range(opts.group_size)]
                pool.groups.append(PartialGroup(prompt, prompt_ids, samples))
        open_groups = [g for g in pool.groups if not g.ended]
        if need <= 0 or not open_groups:
            return
        infer = self.scheduler.infer
        ranks = min(infer.world_size, len(open_groups))
        for r in range(ranks):
            groups = open_groups[r::ranks]
            share = min(len(groups), need // ranks + (r < need % ranks))
            if share <= 0:
                continue
            samples = [s for g in groups for s in g.samples if not s.ended]
            place = {id(g): i for i, g in enumerate(groups)}
            owner = {id(s): place[id(g)] for g in groups for s in g.samples}
            work = [
                PoolSample(
                    owner[id(s)],
                    s.sample,
                    tuple(s.token_ids),
                    tuple(s.logprobs),
                    s.routed_experts,
                )
                for s in samples
            ]
            index = len(self.requests)
            ref = self.scheduler.send(
                f"{self.scheduler.request_prefix}partial-{self.uid}:{index}",
                index,
                [g.prompt_ids for g in groups],
                self.params,
                [sample_fields(g.prompt) for g in groups],
                work,
                share,
            )
            self.requests.append(_Request(groups, samples, self.scheduler.version, ref))

    # ---- collecting ------------------------------------------------------------------
    def result(
        self, on_progress: ProgressFn | None = None, on_phase: PhaseFn | None = None
    ) -> RolloutResult:
        """Wait for the requests, take the ended groups (oldest first), ask again while
        dynamic sampling leaves the step short, and assemble the step's batch."""
        if on_phase is not None:
            on_phase("generate")
        opts = self.opts
        kept: list[PartialGroup] = []
        dropped = 0
        while True:
            for req in self.requests:
                self._collect(req, on_progress)
            for group in [g for g in self.pool.groups if g.ended]:
                if len(kept) >= opts.num_groups:
                    break
                self.pool.groups.remove(group)
                if self._too_stale(group):
                    self.dropped_stale += len(group.samples)
                elif opts.dynamic_sampling and not _varies(group, opts.group_size):
                    dropped += 1
                else:
                    kept.append(group)
            if len(kept) >= opts.num_groups or self.rounds >= opts.max_resample_rounds:
                break
            self.rounds += 1
            self._send(opts.num_groups - len(kept))
        if on_phase is not None:
            on_phase("reward")
        return self._assemble(kept, dropped)

    def _collect(self, req: _Request, on_progress: ProgressFn | None) -> None:
        if req.done is not None:
            return
        while unfinished([req.ref], timeout=0.5):
            if on_progress is not None:
                progress = self.scheduler.infer.poll(InferenceWorker.progress)
                on_progress(sum(p[0] for p in progress), sum(p[1] for p in progress) or 1)
        done = get(req.ref)
        req.done = ScoredRequest.from_wire(done, fetch_scores(done["scores"]))
        for sample, row, result in zip(req.samples, req.done.gens, req.done.results, strict=True):
            new = len(row.token_ids) - len(sample.token_ids)
            if row.token_ids[: len(sample.token_ids)] != sample.token_ids:
                raise RuntimeError("a continued sample came back with other tokens than it had")
            sample.token_ids = list(row.token_ids)
            sample.logprobs = list(row.logprobs or [])
            sample.versions += [req.version] * new
            req.new_tokens += new
            sample.routed_experts = row.routed_experts
            sample.text = row.text
            sample.calls += new > 0
            if not row.paused:
                sample.ended, sample.finished, sample.result = True, row.finished, result

    def _assemble(self, kept: list[PartialGroup], dropped: int) -> RolloutResult:
        if not kept:  # nothing ended that trains: the step still logs
            return RolloutResult(None, [], self._counts(dropped))
        samples = [(g, s) for g in kept for s in g.samples]
        routing = [s.routed_experts for _, s in samples]
        batch = build_batch(
            [g.prompt_ids for g, _ in samples],
            [s.token_ids for _, s in samples],
            [s.scored["score"] for _, s in samples],
            [s.finished for _, s in samples],
            self.scheduler.pad_id,
            {
                "tag": [g.prompt.tag for g, _ in samples],
                "prompt_id": [g.prompt.id for g, _ in samples],
                BEHAVIOUR_LOGPROBS: [s.logprobs for _, s in samples],
                **({ROUTED_EXPERTS: routing} if all(r is not None for r in routing) else {}),
            },
        )
        done = [r.done for r in self.requests if r.done is not None]
        metrics = rollout_metrics(
            batch,
            [res for d in done for res in d.results if res is not None],
            sum(r.new_tokens for r in self.requests),
            [(d.gen_start, d.gen_end) for d in done],
            [span for d in done for span in d.reward_spans],
            [d.occupancy for d in done],
        )
        stale = [self.train_version - v for _, s in samples for v in s.versions]
        metrics.update(self._counts(dropped))
        metrics.update(
            {
                "rollout/staleness": float(max(stale)),
                "rollout/token_staleness/mean": sum(stale) / len(stale),
                "rollout/token_staleness/max": float(max(stale)),
                "rollout/partial_continued": float(sum(s.calls > 1 for _, s in samples)),
            }
        )
        rows = [
            {
                "response": s.text,
                "answer": g.prompt.answer,
                "tag": g.prompt.tag,
                "prompt": g.prompt.messages[-1]["content"],
                "reward": s.scored["score"],
                **{k: v for k, v in s.scored.items() if k != "score"},
                "finished": s.finished,
                "response_tokens": len(s.token_ids),
                "policy_version": s.versions[0],
                "policy_versions": sorted(set(s.versions)),
                "continued": s.calls > 1,
            }
            for g, s in samples
        ]
        return RolloutResult(batch, rows, metrics)

    def _counts(self, dropped: int) -> dict[str, float]:
        return {
            "rollout/requests": float(len(self.requests)),
            "rollout/dropped_groups": float(dropped),
            "rollout/aborted": 0.0,
            "rollout/sample_rounds": float(self.rounds + 1),
            "rollout/dropped_stale": float(self.dropped_stale),
            "rollout/paused": float(self.pool.paused()),
        }


def _varies(group: PartialGroup, n: int) -> bool:
    scores = torch.tensor([float(s.scored["score"]) for s in group.samples])
    return bool(groups_with_variance(scores, n)[0])

"""The prompt scheduler: a step's prompt groups as separate generation requests, each
sample scored the moment it ends, while the other samples still generate.

    draw prompts → one request per `request_groups` groups, spread over the actor_infer ranks
    → actor_infer sends each sample to a reward worker the step it ends (no driver round
      trip; the reward workers take turns), so rewards overlap generation
    → dynamic sampling: groups whose rewards all agree are dropped; once the requests done
      so far (in order) hold enough groups, the outstanding ones are aborted (over-sampling
      and early termination); if too few groups are left, more prompts are drawn, at most
      `max_resample_rounds` times
    → one `RolloutResult` in request order, so a run repeats exactly whatever the timing

A `PendingRollout` is started and collected separately: the pipeline's async mode starts
step t+1's rollout before it trains step t (`rollout.max_staleness`). An actor_infer rank
runs its calls one at a time in the order they were sent, weight syncs included, so the
policy version a request is generated with is known when it is sent (`version`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from rollcli.algorithms.dapo import groups_with_variance
from rollcli.data.batch_keys import (
    BEHAVIOUR_LOGPROBS,
    ROUTED_EXPERTS,
)
from rollcli.data.prompts import Prompt
from rollcli.distributed.calls import get, submit, unfinished
from rollcli.distributed.local_group import WorkerGroup
from rollcli.rollout.result import RolloutResult, build_batch
from rollcli.rollout.rollout_metrics import rollout_metrics
from rollcli.rollout.rows import GenerationRow, ScoredRequest
from rollcli.rollout.worker_api import InferenceWorker
from rollcli.strategies.sampling import SamplingParams

DrawFn = Callable[[int], tuple[list[Prompt], list[list[int]]]]
ProgressFn = Callable[[int, int], None]  # (tokens generated, token budget)
PhaseFn = Callable[[str], None]
SEED_STRIDE = 7919  # request i samples with seed params.seed + SEED_STRIDE * i


@dataclass
class _Request:
    index: int
    prompts: list[Prompt]
    prompt_ids: list[list[int]]
    version: int
    ref: Any  # the generation request's ref; its samples' score refs come inside it
    request_id: str = ""
    done: ScoredRequest | None = None
    aborted: bool = False


@dataclass
class SchedulerOptions:
    group_size: int
    num_groups: int  # groups a step trains on
    # groups per request; 0: one request per actor_infer rank (an engine decodes a request as
    # one batch, and a rank runs its requests one at a time), two with dynamic sampling (so
    # the second can be aborted once the first holds enough informative groups)
    request_groups: int = 0
    dynamic_sampling: bool = False
    oversample: float = 1.0  # dynamic sampling: groups drawn in the first round / num_groups
    max_resample_rounds: int = 3


@dataclass
class PendingRollout:
    scheduler: RolloutScheduler
    params: SamplingParams
    opts: SchedulerOptions
    uid: int = 0
    requests: list[_Request] = field(default_factory=list)
    rounds: int = 0

    def result(
        self, on_progress: ProgressFn | None = None, on_phase: PhaseFn | None = None
    ) -> RolloutResult:
        """Wait for the requests (in order), drop / top up / abort as dynamic sampling
        needs, and assemble the step's batch."""
        if on_phase is not None:
            on_phase("generate")
        opts, n = self.opts, self.opts.group_size
        kept: list[tuple[_Request, int]] = []  # (request, group index within it)
        dropped = 0
        i = 0
        while True:
            if i == len(self.requests):  # every request is in and the batch is short
                if not opts.dynamic_sampling or self.rounds >= opts.max_resample_rounds:
                    break
                self.rounds += 1
                self.scheduler.submit(self, opts.num_groups - len(kept))
                continue
            req = self.requests[i]
            self._wait(req, on_progress)
            if opts.dynamic_sampling:
                scores = [r["score"] for r in req.done.results]
                keep = groups_with_variance(torch.tensor(scores), n).tolist()
            else:
                keep = [True] * len(req.prompts)
            for g, ok in enumerate(keep):
                if ok and len(kept) < opts.num_groups:
                    kept.append((req, g))
                elif not ok:
                    dropped += 1
            i += 1
            if len(kept) >= opts.num_groups:
                break
        if on_phase is not None:  # the step's samples are scored (rewards ran alongside)
            on_phase("reward")
        aborted = 0
        rest = self.requests[i:]  # enough groups: the rest is not needed
        if rest:
            self.scheduler.infer.signal(InferenceWorker.abort, [r.request_id for r in rest])
        for req in rest:
            req.aborted = True
            aborted += len(req.prompts)
        if not kept:  # every group agreed: train on the last request so the step still logs
            last = self.requests[i - 1]
            kept = [(last, g) for g in range(len(last.prompts))]
        return self._assemble(kept, dropped, aborted)

    def _wait(self, req: _Request, on_progress: ProgressFn | None) -> None:
        while unfinished([req.ref], timeout=0.5):
            if on_progress is not None:
                progress = self.scheduler.infer.poll(InferenceWorker.progress)
                done_tokens = sum(p[0] for p in progress)
                on_progress(done_tokens, sum(p[1] for p in progress) or 1)
        self._collect(req)

    @staticmethod
    def _collect(req: _Request) -> None:
        """The request's result and its samples' scores (most were scored while it ran)."""
        if req.done is not None:
            return
        done = get(req.ref)
        scored = None if done["aborted"] else fetch_scores(done["scores"])
        req.done = ScoredRequest.from_wire(done, scored)

    def _done(self) -> list[ScoredRequest]:
        """The requests that ran to the end (aborted ones are collected, not counted)."""
        for req in self.requests:
            if req.aborted:
                self._collect(req)
        return [r.done for r in self.requests if r.done and not r.done.aborted]

    def _assemble(
        self, kept: list[tuple[_Request, int]], dropped: int, aborted: int
    ) -> RolloutResult:
        n = self.opts.group_size
        gens: list[GenerationRow] = []
        prompt_ids, results, prompts, versions = [], [], [], []
        for req, g in kept:
            for j in range(g * n, (g + 1) * n):
                gen, res = req.done.gens[j], req.done.results[j]
                prompt = req.prompts[gen.prompt_index]
                gens.append(gen)
                prompt_ids.append(req.prompt_ids[gen.prompt_index])
                results.append(res)
                prompts.append(prompt)
                versions.append(req.version)
        batch = build_batch(
            prompt_ids,
            [g.token_ids for g in gens],
            [r["score"] for r in results],
            [g.finished for g in gens],
            self.scheduler.pad_id,
            {
                "tag": [p.tag for p in prompts],
                "prompt_id": [p.id for p in prompts],
                **(
                    {BEHAVIOUR_LOGPROBS: [g.logprobs for g in gens]}
                    if all(g.logprobs is not None for g in gens)
                    else {}
                ),
                **(
                    {ROUTED_EXPERTS: [g.routed_experts for g in gens]}
                    if all(g.routed_experts is not None for g in gens)
                    else {}
                ),
            },
        )
        done = self._done()
        metrics = rollout_metrics(
            batch,
            [r for d in done for r in d.results],
            sum(len(g.token_ids) for d in done for g in d.gens),
            [(d.gen_start, d.gen_end) for d in done],
            [span for d in done for span in d.reward_spans],
            [d.occupancy for d in done],
        )
        metrics.update(
            {
                "rollout/requests": float(len(done)),
                "rollout/dropped_groups": float(dropped),
                "rollout/aborted": float(aborted),
                "rollout/sample_rounds": float(self.rounds + 1),
            }
        )
        metrics["rollout/staleness"] = self.scheduler.version - min(versions)
        rows = [
            {
                "response": g.text,
                "answer": p.answer,
                "tag": p.tag,
                "prompt": p.messages[-1]["content"],
                "reward": r["score"],
                **{k: v for k, v in r.items() if k != "score"},
                "finished": g.finished,
                "response_tokens": len(g.token_ids),
                "policy_version": v,
            }
            for g, r, p, v in zip(gens, results, prompts, versions, strict=True)
        ]
        return RolloutResult(batch, rows, metrics)


class RolloutScheduler:
    def __init__(
        self,
        infer: WorkerGroup,
        reward: WorkerGroup,
        pad_id: int,
        draw: DrawFn,
        request_prefix: str = "",
    ) -> None:
        """`request_prefix` keeps this scheduler's request ids apart from another's on the
        same ranks (an aborted id stays aborted there): validation's from training's."""
        self.infer = infer
        self.reward = reward
        self.pad_id = pad_id
        self.draw = draw
        self.request_prefix = request_prefix
        self.version = 0  # weight syncs sent to actor_infer so far (the pipeline counts them)
        self._next_infer = 0
        self._rollouts = 0  # rollouts started: request ids are "rollout:index"

    def start(self, params: SamplingParams, opts: SchedulerOptions) -> PendingRollout:
        """Draw the first round of prompts and send its requests; returns at once."""
        pending = PendingRollout(self, params, opts, uid=self.next_uid())
        first = opts.num_groups
        if opts.dynamic_sampling:
            first = max(first, math.ceil(opts.num_groups * opts.oversample))
        self.submit(pending, first)
        return pending

    def submit(self, pending: PendingRollout, num_groups: int) -> None:
        """Draw `num_groups` prompts and send them as requests (generation, then reward)."""
        prompts, ids = self.draw(num_groups)
        opts = pending.opts
        per_rank = 2 if opts.dynamic_sampling else 1
        per_request = opts.request_groups or max(
            1, math.ceil(opts.num_groups / (per_rank * self.infer.world_size))
        )
        meta = [sample_fields(p) for p in prompts]
        for start in range(0, len(prompts), per_request):
            index = len(pending.requests)
            part = slice(start, start + per_request)
            request_id = f"{self.request_prefix}{pending.uid}:{index}"
            ref = self.send(request_id, index, ids[part], pending.params, meta[part])
            pending.requests.append(
                _Request(index, prompts[part], ids[part], self.version, ref, request_id)
            )

    def next_uid(self) -> int:
        """A new rollout's number (its requests' ids start with it)."""
        self._rollouts += 1
        return self._rollouts - 1

    def send(
        self,
        request_id: str,
        index: int,
        prompt_ids: list[list[int]],
        params: SamplingParams,
        meta: list[dict[str, Any]],
        *pool: Any,
    ) -> Any:
        """One generation request to the next actor_infer rank in turn, sampled with the
        rollout's seed moved by its `index`, each sample scored as it ends; `pool`: a
        partial request's samples and stop (`generate_request`'s `pool`, `until_groups`)."""
        infer = self.infer.workers[self._next_infer % self.infer.world_size]
        self._next_infer += 1
        params = replace(params, seed=params.seed + SEED_STRIDE * index)
        return submit(
            infer,
            InferenceWorker.generate_request,
            prompt_ids,
            params,
            request_id,
            self.reward.workers,
            meta,
            *pool,
        )


def fetch_scores(refs: list[Any]) -> list[Any]:
    """The reward answers of a request's samples, None where a sample was paused."""
    got = iter(get([r for r in refs if r is not None]))
    return [None if r is None else next(got) for r in refs]


def answer_all(
    infer: WorkerGroup,
    reward: WorkerGroup,
    pad_id: int,
    prompts: list[Prompt],
    prompt_ids: list[list[int]],
    params: SamplingParams,
    on_progress: ProgressFn | None = None,
    request_prefix: str = "answers-",
) -> RolloutResult:
    """Every prompt answered `params.n` times and scored, through the scheduler that runs
    training's rollouts (one group per prompt, none dropped; rows in prompt order): the
    pipeline's held-out validation and `roll eval`."""
    scheduler = RolloutScheduler(
        infer, reward, pad_id, lambda _n: (prompts, prompt_ids), request_prefix
    )
    opts = SchedulerOptions(group_size=params.n, num_groups=len(prompts))
    return scheduler.start(params, opts).result(on_progress)


def sample_fields(prompt: Prompt) -> dict[str, Any]:
    """What a reward function sees of a prompt (beside the response and whether it
    finished): its answer, tag and text, the dataset columns the function asks for by name,
    and for a chat-message prompt in the data, the `messages` (TRL's conversational
    format)."""
    fields = {
        **prompt.columns,
        "answer": prompt.answer,
        "tag": prompt.tag,
        "prompt": prompt.messages[-1]["content"],
    }
    if prompt.conversational:
        fields["messages"] = [dict(m) for m in prompt.messages]
    return fields

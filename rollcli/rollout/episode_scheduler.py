"""The multi-turn rollout scheduler: many episodes, env workers and the model at once.

Every env-worker call and every generation call is a future; a generation's replies go
straight back to their env workers, one call per worker, and env results make their
episodes ready for the model. Which episodes share a generation batch is decided one of two
ways. In lockstep (the default, and the pipeline's) the batches are rounds: once no call is
running, every episode that waits for a reply is generated for, in episode order, so the
batches and the sampled replies are a function of the episodes alone and a run repeats
exactly (a row's logits change in their last bits with the batch it is in). Otherwise a
free policy worker generates for whichever episodes are ready at that moment while the
others are still being stepped: faster with slow environments and several policy workers,
but the batches, and so the replies, depend on timing.

The same code runs with Ray actors (the pipeline: env workers and actor_infer ranks are
actor handles, calls return object refs) and with plain objects (`roll eval` and unit
tests: a call runs at once and returns its finished result), so evaluation plays episodes
exactly as training does.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rollcli.distributed.calls import Done, get, wait_any
from rollcli.distributed.calls import submit as call
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits, user_turn
from rollcli.rollout.worker_api import EnvHost, InferenceWorker
from rollcli.strategies.sampling import SamplingParams

# what a pending call of `play` awaits: an env host's resets or steps, or a generation
ENV_CALL, GEN_CALL = "env_call", "gen_call"

ProgressFn = Callable[[int, int], None]


# ---- policies --------------------------------------------------------------------------------
class ModelPolicy:
    """Replies from actor_infer workers (Ray handles or plain `ActorInferWorker`s); each
    generation call goes to a free worker, so `len(workers)` calls run at once.

    `sessions=True` (the hf engine built with `session_mib`): each episode is a session of
    the engine, so a turn prefills only what it adds to the episode's last turn. An ended
    episode's session is freed with the next call to each worker (a turn may have gone to
    any of them), and by `close` at the end."""

    def __init__(self, workers: list[Any], params: SamplingParams, sessions: bool = False) -> None:
        self.workers = list(workers)
        self.params = params
        self.busy: set[int] = set()
        self.calls = 0
        self.sessions = sessions
        self.tag = uuid.uuid4().hex[:12]  # session ids unique to this set of episodes
        self.ended: list[list[str]] = [[] for _ in self.workers]  # to free, per worker

    @property
    def free(self) -> bool:
        return len(self.busy) < len(self.workers)

    @property
    def width(self) -> int:
        """How many generation calls run at once."""
        return len(self.workers)

    def submit(self, episodes: list[Episode]) -> tuple[int, Any]:
        rank = next(r for r in range(len(self.workers)) if r not in self.busy)
        self.busy.add(rank)
        params = replace(self.params, n=1, seed=self.params.seed + 7919 * self.calls)
        self.calls += 1
        prompts = [ep.context_ids() for ep in episodes]
        kwargs = {}
        if self.sessions:
            kwargs = {
                "sessions": [self._id(ep) for ep in episodes],
                "end_sessions": self.ended[rank],
            }
            self.ended[rank] = []
        return rank, call(
            self.workers[rank], InferenceWorker.generate, prompts, params=params, **kwargs
        )

    def collect(self, rank: int, handle: Any) -> list[dict[str, Any]]:
        self.busy.discard(rank)
        return sorted(get(handle), key=lambda g: g["prompt_index"])

    def end(self, episode: Episode) -> None:
        if self.sessions:
            for pending in self.ended:
                pending.append(self._id(episode))

    def close(self) -> None:
        """Free the sessions of the episodes that ended since each worker's last call."""
        for rank, ids in enumerate(self.ended):
            if ids:
                get(call(self.workers[rank], InferenceWorker.end_sessions, ids))
        self.ended = [[] for _ in self.workers]

    def _id(self, episode: Episode) -> str:
        return f"{self.tag}/{episode.spec.index}"


class ScriptedPolicy:
    """A policy without a model: `reply(episode)` is each turn's whole reply text, written
    at once (the random baseline, the experts of `roll data episodes`). A move of an env
    that answers in tags is `answer_reply(move)`; a tool env's expert writes its calls too.

    With a `reply_prefix` the prompt already holds the reply's opening, so the policy sends
    the rest; a reply that does not start with the prefix cannot follow that prompt and is
    an error that says so."""

    def __init__(self, reply: Callable[[Episode], str], reply_prefix: str = "") -> None:
        self.reply = reply
        self.reply_prefix = reply_prefix  # the prompt already opens the reply
        self.free = True
        self.width = 1

    def submit(self, episodes: list[Episode]) -> tuple[int, Any]:
        replies = []
        for ep in episodes:
            text = self.reply(ep)
            if not text.startswith(self.reply_prefix):
                raise ValueError(
                    f"the scripted reply {text[:60]!r} does not start with agentic.reply_prefix "
                    f"{self.reply_prefix!r}, which every prompt already ends with"
                )
            replies.append(
                {"token_ids": [], "text": text[len(self.reply_prefix) :], "finished": True}
            )
        return 0, Done(replies)

    def collect(self, rank: int, handle: Any) -> list[dict[str, Any]]:
        return get(handle)

    def end(self, episode: Episode) -> None:
        pass  # no model, no per-episode state to free

    def close(self) -> None:
        pass


def answer_reply(move: str) -> str:
    """A move in the answer format of roll's envs.

    >>> answer_reply("Left")
    '<answer>Left</answer>'
    """
    return f"<answer>{move}</answer>"


def has_expert(env: Any) -> bool:
    """Whether `env` has a solver: `expert_reply()` (the whole reply) or `expert_action()`
    (a move, written in answer tags)."""
    return hasattr(env, "expert_reply") or hasattr(env, "expert_action")


def expert_policy(hosts: list[Any], reply_prefix: str = "") -> ScriptedPolicy:
    """Each turn the expert reply of the episode's own env, read from plain `EnvWorker`
    hosts (an episode's env sits in its host's slot `spec.index`): `env.expert_reply()`
    where the env writes whole replies, else `env.expert_action()` in answer tags."""

    def reply(ep: Episode) -> str:
        env = next(h.envs[ep.spec.index] for h in hosts if ep.spec.index in h.envs)
        if hasattr(env, "expert_reply"):
            return str(env.expert_reply())
        return answer_reply(env.expert_action())

    return ScriptedPolicy(reply, reply_prefix)


def random_policy(seed: int = 0, reply_prefix: str = "") -> ScriptedPolicy:
    """The baseline: a uniformly random legal action each turn."""
    rng = random.Random(seed)
    return ScriptedPolicy(
        lambda ep: answer_reply(rng.choice(ep.actions) if ep.actions else ""), reply_prefix
    )


# ---- the scheduler -----------------------------------------------------------------------------
def play_episodes(
    hosts: list[Any],
    policy: ModelPolicy | ScriptedPolicy,
    specs: list[EpisodeSpec],
    fmt: TurnFormat,
    limits: Limits,
    on_progress: ProgressFn | None = None,
    max_batch: int = 256,
    gather_s: float = 0.05,
    lockstep: bool = True,
) -> tuple[list[Episode], dict[str, float]]:
    """Play every episode of `specs` to its end; returns them (in `specs` order) and the
    scheduler's counters: generation calls, mean batch size, prompt tokens prefilled and
    reused from the episode's earlier turns (`prefix_hit_tokens`), and with sessions the
    turns that prefilled more than their new tokens (`turn_cache_misses`: evicted, dropped
    by a weight update, or a prompt that does not extend the last turn).

    `lockstep` (exact): generation batches are a function of the episodes alone, never of
    timing. Once no env or generation call is running, every episode that waits for a reply
    is generated for, in `specs` order, split evenly over the policy's free workers (at most
    `max_batch` each). A row's logits depend on the batch it is in (padding, batch size) and
    its sampled tokens on its place in the batch, so this is what makes a run repeatable.
    Without it, a generation starts as soon as a worker is free and some episodes are ready;
    env calls that finish within `gather_s` seconds still join its batch (env steps take
    milliseconds, a generation seconds)."""
    episodes = [Episode(spec) for spec in specs]
    host_of = {ep.spec.index: i % len(hosts) for i, ep in enumerate(episodes)}
    by_index = {ep.spec.index: ep for ep in episodes}
    # handle -> (ENV_CALL, None) | (GEN_CALL, (rank, batch))
    pending: dict[Any, tuple[str, Any]] = {}
    for h, host in enumerate(hosts):
        items = [(ep.spec.index, ep.spec.seed) for ep in episodes if host_of[ep.spec.index] == h]
        if items:
            pending[call(host, EnvHost.reset, items)] = (ENV_CALL, None)
    ready: list[int] = []
    counts = {"finished": 0, "gen_calls": 0, "gen_rows": 0, "prefill": 0, "hit": 0, "miss": 0}
    held: dict[int, int] = {}  # per episode: the prompt tokens its session should hold

    def finish(handle: Any) -> None:
        kind, what = pending.pop(handle)
        if kind == ENV_CALL:  # results of resets or steps: episodes end or become ready
            for index, result in get(handle).items():
                ep = by_index[index]
                if not ep.prompt_ids and not ep.done:
                    ep.start(result, fmt, user_turn(result))
                else:
                    ep.observe(result, fmt, limits, user_turn(result))
                if ep.done:
                    counts["finished"] += 1
                    policy.end(ep)
                else:
                    ready.append(index)
            if on_progress is not None:
                on_progress(counts["finished"], len(episodes))
            return
        rank, batch = what  # replies: back to their env workers at once
        per_host: dict[int, dict[int, str]] = {}
        for index, reply in zip(batch, policy.collect(rank, handle), strict=True):
            reply = {**reply, "text": fmt.reply_prefix + reply["text"]}
            context = len(by_index[index].context_ids())
            cached = int(reply.get("cached_tokens", 0))
            counts["prefill"] += context - cached
            counts["hit"] += cached
            counts["miss"] += cached < held.get(index, 0)
            held[index] = context + len(reply["token_ids"]) - 1  # its last token never fed
            by_index[index].add_reply(reply)
            per_host.setdefault(host_of[index], {})[index] = reply["text"]
        for h, texts in per_host.items():
            pending[call(hosts[h], EnvHost.step, texts)] = (ENV_CALL, None)

    def submit(batch: list[int]) -> None:
        rank, handle = policy.submit([by_index[i] for i in batch])
        pending[handle] = (GEN_CALL, (rank, batch))
        counts["gen_calls"] += 1
        counts["gen_rows"] += len(batch)

    while pending or ready:
        if lockstep and ready and not pending:  # a round: every waiting episode, in order
            ready.sort()
            size = min(max_batch, -(-len(ready) // policy.width))
            while ready and policy.free:
                batch, ready[:] = ready[:size], ready[size:]
                submit(batch)
        elif not lockstep and ready and policy.free:  # every episode that is ready now
            env_calls = [h for h, (kind, _) in pending.items() if kind == ENV_CALL]
            if env_calls and gather_s > 0:  # env steps take milliseconds: let them join
                for handle in wait_any(env_calls, timeout=gather_s):
                    finish(handle)
            batch, ready[:] = ready[:max_batch], ready[max_batch:]
            submit(batch)
        if pending:
            for handle in wait_any(list(pending)):
                finish(handle)
    _release_unfinished(hosts, episodes, host_of)
    policy.close()
    calls = counts["gen_calls"]
    stats = {"gen_calls": float(calls), "gen_batch_mean": counts["gen_rows"] / max(calls, 1)}
    if isinstance(policy, ModelPolicy):
        stats["prefill_tokens"] = float(counts["prefill"])
        stats["prefix_hit_tokens"] = float(counts["hit"])
    if isinstance(policy, ModelPolicy) and policy.sessions:
        stats["turn_cache_misses"] = float(counts["miss"])
    return episodes, stats


def _release_unfinished(hosts: list[Any], episodes: list[Episode], host_of: dict[int, int]) -> None:
    """Episodes the driver ended (turn or context limit) still hold an env on their worker."""
    per_host: dict[int, list[int]] = {}
    for ep in episodes:
        if ep.end in ("max_turns", "context"):
            per_host.setdefault(host_of[ep.spec.index], []).append(ep.spec.index)
    for h, slots in per_host.items():
        get(call(hosts[h], EnvHost.release, slots))

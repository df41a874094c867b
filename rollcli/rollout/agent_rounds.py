"""Lockstep generation rounds for agent programs' requests.

Agent programs (`agentic.agent`) send their chat requests whenever their own code gets
there, so the order requests arrive in is a matter of timing. A reply's sampled tokens
depend on the generation batch it is in (its row's logits change in their last bits with
the batch's padding and size, and rows share the call's random generator), so batching by
arrival would make a run unrepeatable. The gate batches as the built-in scheduler's lockstep
mode does (`rollcli.rollout.episode_scheduler.play_episodes`): a round starts once every
episode still running waits for a reply, and holds all of them in episode order, split
evenly over the policy's workers. A round's sampling seed comes from the step's seed and
the round's number, so which tokens an episode gets is a function of the step and its
episodes, never of arrival times: a resumed run repeats the uninterrupted one (given agent
programs that are themselves deterministic).

An episode whose program has not asked for a reply within `timeout_s` of the last round
is dropped from the gate (its program is not waited for any longer, and is told so if it
asks later); that alone depends on timing, and is counted.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

from rollcli.rollout.episode import Episode
from rollcli.rollout.episode_scheduler import ModelPolicy


class GateClosed(RuntimeError):
    """A request from an episode the gate no longer waits for."""


class RoundGate:
    """Collects reply requests and generates them in rounds (see the module docstring)."""

    def __init__(self, policy: ModelPolicy, episodes: list[int], timeout_s: float) -> None:
        self.policy = policy
        self.live = set(episodes)  # programs still running (waited for)
        self.waiting: dict[int, tuple[Episode, Future]] = {}
        self.timeout_s = timeout_s
        self.cv = threading.Condition()
        self.rounds = 0
        self.rows = 0
        self.timed_out: list[int] = []
        self.failure: BaseException | None = None

    # ---- called from request handlers and program threads ------------------------------
    def ask(self, index: int, episode: Episode) -> Future:
        """A future of `episode`'s next reply (a dict as the engine returns it)."""
        fut: Future = Future()
        with self.cv:
            if index not in self.live:
                raise GateClosed(
                    f"episode {index} is no longer running (it timed out, ended, or its step is "
                    "over); its program should return"
                )
            if index in self.waiting:
                raise GateClosed(
                    f"episode {index} already waits for a reply: one request at a time"
                )
            self.waiting[index] = (episode, fut)
            self.cv.notify_all()
        return fut

    def leave(self, index: int) -> None:
        """The episode's program returned: rounds no longer wait for it."""
        with self.cv:
            self.live.discard(index)
            self.cv.notify_all()

    # ---- the round loop (its own thread) -----------------------------------------------
    def run(self) -> None:
        last = time.monotonic()
        while True:
            with self.cv:
                while self.live and len(self.waiting) < len(self.live):
                    left = last + self.timeout_s - time.monotonic()
                    if left <= 0:  # programs that neither ask nor return: stop waiting
                        late = sorted(self.live - set(self.waiting))
                        self.timed_out += late
                        self.live -= set(late)
                        break
                    self.cv.wait(left)
                if not self.live:
                    return
                batch = sorted(self.waiting.items())
                self.waiting.clear()
            try:
                replies = self._generate([ep for _, (ep, _) in batch])
            except BaseException as exc:  # the engine failed: every waiting request fails
                self.failure = exc
                for _, (_, fut) in batch:
                    fut.set_exception(exc)
                with self.cv:
                    self.live.clear()
                return
            for (_, (_, fut)), reply in zip(batch, replies, strict=True):
                fut.set_result(reply)
            last = time.monotonic()

    def _generate(self, episodes: list[Episode]) -> list[dict[str, Any]]:
        """One round: the episodes split evenly over the policy's workers, in order."""
        self.rounds += 1
        self.rows += len(episodes)
        size = -(-len(episodes) // self.policy.width)
        calls = []
        for start in range(0, len(episodes), size):
            calls.append(self.policy.submit(episodes[start : start + size]))
        replies: list[dict[str, Any]] = []
        for rank, handle in calls:
            replies += self.policy.collect(rank, handle)
        return replies

    def end(self, episode: Episode) -> None:
        """Free the engine's session of an ended episode (with the next call)."""
        self.policy.end(episode)

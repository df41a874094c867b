"""The hf engine's per-episode KV caches ("sessions"): a multi-turn episode's next prompt is
its previous prompt + the reply + the environment's turn, so the keys and values of all but
the new turn were already computed when the reply was generated. Keeping them lets a turn
prefill only its new tokens instead of the whole conversation.

A session is keyed by an id the caller chooses (one per episode) and holds the token ids it
has processed with their per-layer keys and values. A prompt reuses the longest common
prefix of those ids (capped so that at least its last token is prefilled: the next token's
logits come from it); KV at a position depends only on the tokens up to it, so any common
prefix is exact. A prompt that does not extend its session (an edited or trimmed context)
reuses only what still matches, often nothing past the system prompt.

Memory is bounded by `max_mib`: the least recently used sessions are dropped first. Per
token a session costs `2 x layers x kv_heads x head_dim x bytes`: for SmolLM2-135M (30
layers, 3 KV heads of 64) in float32 that is 45 KiB, so a 600-token FrozenLake episode
holds 26 MiB. Sessions come from one set of weights: `clear` on every weight update.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch


@dataclass
class Session:
    ids: list[int]  # the tokens whose KV is held, in order
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # keys, values: [kv_heads, len, head_dim]
    routing: torch.Tensor | None = None  # an MoE model's experts at `ids`, `[len, layers, k]`

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)


class TurnCache:
    """Sessions by id, least recently used dropped first once over `max_mib`."""

    def __init__(self, max_mib: float) -> None:
        self.max_bytes = int(max_mib * 2**20)
        self.sessions: OrderedDict[str, Session] = OrderedDict()
        self.nbytes = 0
        self.lock = threading.Lock()  # `end` may run beside a generation (actor_infer)

    def reusable(self, session_id: str, prompt: list[int]) -> tuple[Session | None, int]:
        """The session of `session_id` and how many of `prompt`'s leading tokens it holds
        (0 and None when none)."""
        with self.lock:
            session = self.sessions.get(session_id)
            if session is None:
                return None, 0
            self.sessions.move_to_end(session_id)
        limit = min(len(session.ids), len(prompt) - 1)
        n = 0
        while n < limit and session.ids[n] == prompt[n]:
            n += 1
        return (session, n) if n else (None, 0)

    def store(self, session_id: str, session: Session) -> None:
        """Replace `session_id`'s session; drop the least recently used ones over budget."""
        size = session.nbytes
        with self.lock:
            self._drop(session_id)
            if size > self.max_bytes:
                return
            self.sessions[session_id] = session
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                self._drop(next(iter(self.sessions)))

    def end(self, session_ids: list[str]) -> None:
        """Free the sessions of episodes that ended."""
        with self.lock:
            for session_id in session_ids:
                self._drop(session_id)

    def clear(self) -> None:
        with self.lock:
            self.sessions.clear()
            self.nbytes = 0

    def _drop(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.nbytes -= session.nbytes

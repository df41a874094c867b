"""A seeded, resumable prompt sampler: shuffled epochs, exact position in `state_dict`.

>>> s = PromptSampler(5, seed=0)
>>> first = s.next_indices(3) + s.next_indices(3)   # crosses an epoch boundary
>>> t = PromptSampler(5, seed=0); _ = t.next_indices(3)
>>> u = PromptSampler(5, seed=0); u.load_state_dict(t.state_dict())
>>> u.next_indices(3) == first[3:]
True
"""

from __future__ import annotations

import random


class PromptSampler:
    def __init__(self, size: int, seed: int) -> None:
        if size <= 0:
            raise ValueError("cannot sample from an empty prompt set")
        self.size, self.seed = size, seed
        self.epoch, self.position = 0, 0
        self._order = self._epoch_order(0)

    def _epoch_order(self, epoch: int) -> list[int]:
        order = list(range(self.size))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next_indices(self, n: int) -> list[int]:
        out: list[int] = []
        while len(out) < n:
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._epoch_order(self.epoch)
            take = min(n - len(out), self.size - self.position)
            out += self._order[self.position : self.position + take]
            self.position += take
        return out

    def state_dict(self) -> dict[str, int]:
        return {
            "size": self.size,
            "seed": self.seed,
            "epoch": self.epoch,
            "position": self.position,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["size"] != self.size:
            raise ValueError(
                f"sampler state is for {state['size']} prompts, this data has {self.size}"
            )
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
        self._order = self._epoch_order(self.epoch)

"""`PromptSource`'s checkpoint under async rollout with dynamic sampling: a rollout started
ahead of its step may draw more prompts while it finishes (top-ups), which the checkpoint
does; the sampler position saved must be the one after those draws, or a resumed run draws
the same prompts again and leaves the uninterrupted run."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from rollcli.data.batch import Batch
from rollcli.data.prompts import Prompt
from rollcli.data.sampler import PromptSampler
from rollcli.pipelines.rl.prompts import AHEAD_FILE, PromptSource
from rollcli.rollout.result import RolloutResult

PROMPTS = 10


class TopUpRollout:
    """A rollout started ahead whose groups all scored alike: finishing it draws `top_up`
    more prompts (dynamic sampling's next round), as `PendingRollout.result` does."""

    def __init__(self, source: PromptSource, top_up: int) -> None:
        self.source, self.top_up = source, top_up

    def result(self, on_progress, on_phase) -> RolloutResult:
        prompts, _ = self.source.draw(self.top_up)
        batch = Batch({"scores": torch.zeros(len(prompts))}, {}, {})
        return RolloutResult(batch, [{"prompt": p.id} for p in prompts], {})


def _source() -> PromptSource:
    cfg = SimpleNamespace(
        seed=3,
        rollout=SimpleNamespace(group_size=2, batch_size=4, max_staleness=1, partial=False),
    )
    ctl = SimpleNamespace(ui=SimpleNamespace(generation=None), phase=None)
    source = PromptSource(cfg, ctl)
    source.train_prompts = [
        Prompt(id=str(i), messages=({"role": "user", "content": str(i)},), answer="", tag="")
        for i in range(PROMPTS)
    ]
    source.train_ids = [[i] for i in range(PROMPTS)]
    source.sampler = PromptSampler(PROMPTS, cfg.seed)
    return source


def test_checkpoint_saves_the_sampler_after_the_rollouts_ahead_top_up(tmp_path) -> None:
    source = _source()
    source.draw(2)  # the step just trained
    source.draw(2)  # step + 1's first round, started ahead
    source.ahead = {2: TopUpRollout(source, top_up=2)}
    # the pipeline's checkpoint: driver state first, then the files
    state = source.state_dict()
    files = source.files()
    uninterrupted = [p.id for p in source.draw(4)[0]]  # what step + 2 draws next

    torch.save(files[AHEAD_FILE], tmp_path / AHEAD_FILE)
    resumed = _source()
    resumed.load_state_dict(state, tmp_path)
    assert [r["prompt"] for r in resumed.ahead[2].rows] == [
        r["prompt"] for r in source.ahead[2].rows
    ]
    assert [p.id for p in resumed.draw(4)[0]] == uninterrupted

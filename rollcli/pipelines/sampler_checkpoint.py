"""The driver state of the offline pipelines (sft, dpo, distill): their data sampler's place,
saved with each checkpoint and put back on resume, so a resumed run draws the batches the
uninterrupted one would have drawn (`rollcli.data.sampler`)."""

from __future__ import annotations

from pathlib import Path

from rollcli.data.sampler import PromptSampler
from rollcli.runtime.run_control import RunControl

SAMPLER_KEY = "sampler"  # the sampler's entry in the checkpoint's driver state


def save_sampler(ctl: RunControl, step: int, sampler: PromptSampler) -> None:
    """Write checkpoint `step` with `sampler`'s place as the driver state."""
    ctl.checkpoints.save(step, {SAMPLER_KEY: sampler.state_dict()})


def restore_sampler(
    ctl: RunControl, checkpoint: Path | None, size: int, seed: int
) -> tuple[PromptSampler, int]:
    """Load `checkpoint` (None: the start) through `ctl.checkpoints.restore`; a sampler over
    `size` items with `seed`, at the checkpoint's place, and the checkpoint's step (0 at the
    start)."""
    sampler = PromptSampler(size, seed)
    state = ctl.checkpoints.restore(checkpoint)
    if state is None:
        return sampler, 0
    sampler.load_state_dict(state[SAMPLER_KEY])
    return sampler, int(state["step"])

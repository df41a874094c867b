"""What `roll train` / `roll resume` need from a pipeline (rlvr, sft, dpo, distill, ...).

Pipelines share this interface, not behaviour: each is its own readable loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rollcli.config.recipe import RecipeConfig
from rollcli.pipelines.display_protocol import Display
from rollcli.runs.run_dir import RunDir


class Pipeline(Protocol):
    tracker: Any  # a tracking.fanout.Trackers or None, set by the launcher before setup()
    clusters: Any  # None until setup() started the workers (Ctrl-C then interrupts at once)
    stopped_early: bool  # True when train() returned because request_stop() was called

    def __init__(
        self, cfg: RecipeConfig, run: RunDir, run_id: str, model_path: str, display: Display
    ) -> None: ...

    def setup(self) -> None:
        """Load data, start the workers."""

    def restore(self, checkpoint: Path | None) -> int:
        """Load a checkpoint (None: the start) into workers and driver, rewind the run folder
        (`run.rewind`); return the checkpoint's step."""

    def train(self, start_step: int = 0) -> dict[str, Any]:
        """Run steps `start_step + 1 ..`; return the last step's metrics."""

    def request_stop(self) -> None:
        """Finish the current step, write a checkpoint, return from train()."""

    def shutdown(self) -> None:
        """Kill the workers, close the tracker."""

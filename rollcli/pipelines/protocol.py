"""What the driver loop (`driver.drive`) and `roll train` / `roll resume` need from a
pipeline (rlvr, agentic, sft, dpo, distill).

Pipelines share this interface, not behaviour: each shows its own numbered `step()`, and
one loop, `driver.drive`, runs them all (validation cadence, logging, checkpoints, Ctrl-C,
the time limit, restarting dead workers). The bookkeeping they share is the `RunControl`
the launcher hands them (`run_control.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rollcli.config.recipe import RecipeConfig

if TYPE_CHECKING:  # run_control imports torch; the registry (and the CLI) stay light
    from rollcli.runtime.run_control import RunControl


@dataclass
class StepResult:
    """What one `step(n)` hands the driver."""

    metrics: dict[str, Any]  # the step's metrics line (with "step"); validation is added to it
    samples: list[dict[str, Any]] | None = None  # samples/step-N.jsonl rows (None: no samples)
    summary: str | None = None  # a line the display shows under the step (agentic: env stats)


class Pipeline(Protocol):
    engine: str  # the inference engine the display names ("hf" where there is none)

    def __init__(self, cfg: RecipeConfig, ctl: RunControl, model_path: str) -> None: ...

    def setup(self) -> None:
        """Load data, start the workers (`start_workers`)."""

    def start_workers(self) -> None:
        """Start every worker and tell `ctl.started`; again after a worker died."""

    def baseline(self) -> dict[str, Any]:
        """Step 0: the validation every later one is compared with (distill adds the
        teacher's numbers)."""

    def step(self, n: int) -> StepResult:
        """Step `n`: generate / score / train / sync, as the pipeline's numbered stages."""

    def validate(self) -> dict[str, Any]:
        """The held-out metrics (`val/*`, `time/validate_s`)."""

    def checkpoint(self, n: int) -> None:
        """Write checkpoint `n` (`ctl.checkpoints.save` with the driver state the pipeline keeps)."""

    def restore(self, checkpoint: Path | None) -> int:
        """Load a checkpoint (None: the start) into workers and driver, rewind the run folder
        (`ctl.checkpoints.restore`); return the checkpoint's step."""

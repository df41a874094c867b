"""TensorBoard event files for a run (scalars only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TensorBoardTracker:
    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = folder
        self.writer = SummaryWriter(log_dir=str(folder))

    def rewind(self, step: int) -> None:
        """Steps after `step` will be logged again: hide their old events."""
        from torch.utils.tensorboard import SummaryWriter

        self.writer.close()
        self.writer = SummaryWriter(log_dir=str(self.folder), purge_step=step + 1)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) and key not in ("step", "time"):
                self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()

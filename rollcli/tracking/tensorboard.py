"""TensorBoard event files for a run: every metric as a scalar, each step's samples as a
text table. `rewind` reopens the writer with `purge_step`, so re-logged steps replace the
old ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rollcli.tracking.tracker_values import scalars


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
        for key, value in scalars(metrics).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A Markdown table (TensorBoard's text tab renders it)."""
        if not rows:
            return
        columns = list(dict.fromkeys(k for row in rows for k in row))

        def cell(value: Any) -> str:
            return str(value).replace("|", "\\|").replace("\n", " ")

        lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
        lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
        self.writer.add_text("samples", "\n".join(lines), step)

    def close(self) -> None:
        self.writer.close()

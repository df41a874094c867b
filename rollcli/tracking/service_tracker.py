"""What the SwanLab and W&B trackers share, written once: a run of the service named for the
roll run (its name and group the run id, its config the resolved recipe), offline into the
run folder unless the run asks for online logging and has the API key
(`config.trackers.wants_online`), the numbers of each metrics row at their step, and a
`rewind` that finishes the service's run and opens a new one, since neither service takes a
step twice in one run: each of its runs holds every step once.

`ServiceTracker` holds the bookkeeping; a service supplies two hooks:
- `_start()`: open a run of the service (`self.mode`, `self.project`, `self.run_id`,
  `self.recipe`), its banners kept out of the display (`tracker_values.quiet`);
- `_samples(rows)`: a step's samples as the service shows them (SwanLab: a text per sample;
  W&B: a table), logged under `samples`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from rollcli.config.trackers import wants_online
from rollcli.tracking.tracker_values import quiet, scalars


class ServiceTracker:
    service = ""  # its name in `run.trackers`

    def __init__(
        self,
        run_dir: Path,
        recipe: dict[str, Any],
        run_id: str,
        *,
        mode: str = "offline",
        project: str = "roll",
    ) -> None:
        self.run_dir = run_dir
        self.log_file = run_dir / "trackers.log"
        self.recipe = recipe
        self.run_id = run_id
        self.project = project
        self.mode: Literal["online", "offline"] = (
            "online" if wants_online(self.service, mode) else "offline"
        )
        self.last_step = -1
        self.run = self._start()

    def _start(self) -> Any:
        raise NotImplementedError

    def _samples(self, rows: list[dict[str, Any]]) -> Any:
        raise NotImplementedError

    def log(self, metrics: dict[str, Any], step: int) -> None:
        values = scalars(metrics)
        if values:
            self.run.log(values, step=step)
        self.last_step = max(self.last_step, step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.run.log({"samples": self._samples(rows)}, step=step)
        self.last_step = max(self.last_step, step)

    def rewind(self, step: int) -> None:
        if self.last_step > step:
            self._finish()
            self.run = self._start()
            self.last_step = -1

    def close(self) -> None:
        self._finish()

    def _finish(self) -> None:
        with quiet(self.log_file):
            self.run.finish()

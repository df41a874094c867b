"""SwanLab (ROLL's tracker): offline into `runs/<id>/swanlab/` by default, online with
`SWANLAB_API_KEY` when the run asks for it (docs/runs.md). The `swanlab` extra.

Offline files are SwanLab's own run format (`run-*/run-*.swanlab`), which `swanlab sync
DIR` uploads later. A SwanLab run cannot take a step twice, so `rewind` past logged steps
finishes this SwanLab run and opens a new one: each holds every step once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcli.config.trackers import wants_online
from rollcli.tracking.tracker_values import quiet, scalars


class SwanLabTracker:
    def __init__(
        self,
        run_dir: Path,
        recipe: dict[str, Any],
        run_id: str,
        *,
        mode: str = "offline",
        project: str = "roll",
    ) -> None:
        self.folder = run_dir / "swanlab"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log_file = run_dir / "trackers.log"
        self.recipe = recipe
        self.run_id = run_id
        self.project = project
        self.mode = "online" if wants_online("swanlab", mode) else "offline"
        self.last_step = -1
        self.run = self._start()

    def _start(self) -> Any:
        import swanlab

        settings = swanlab.Settings(
            interactive=False,
            terminal=swanlab.Settings.Terminal(proxy_type="none"),  # leave our display alone
            # no hardware monitor thread; no pip-freeze requirements list (5 s at each start)
            probe=swanlab.Settings.Probe(monitor=False, requirements=False),
        )
        with quiet(self.log_file):
            return swanlab.init(
                mode=self.mode,
                log_dir=str(self.folder),
                project=self.project,
                name=self.run_id,
                group=self.run_id,
                config=self.recipe,
                settings=settings,
                reinit=True,
            )

    def log(self, metrics: dict[str, Any], step: int) -> None:
        values = scalars(metrics)
        if values:
            self.run.log(values, step=step)
        self.last_step = max(self.last_step, step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """One text per sample (its JSON), captioned with its reward."""
        import swanlab

        if not rows:
            return
        texts = [
            swanlab.Text(json.dumps(row, default=str), caption=f"reward {row.get('reward', '-')}")
            for row in rows
        ]
        self.run.log({"samples": texts}, step=step)
        self.last_step = max(self.last_step, step)

    def rewind(self, step: int) -> None:
        if self.last_step > step:
            self.close()
            self.run = self._start()
            self.last_step = -1

    def close(self) -> None:
        with quiet(self.log_file):
            self.run.finish()

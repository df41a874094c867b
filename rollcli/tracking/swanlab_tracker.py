"""SwanLab (ROLL's tracker): offline into `runs/<id>/swanlab/` by default, online with
`SWANLAB_API_KEY` when the run asks for it (docs/runs.md). The `swanlab` extra.

Offline files are SwanLab's own run format (`run-*/run-*.swanlab`), which `swanlab sync
DIR` uploads later. What it shares with W&B (steps, rewind by a new run): service_tracker.py.
"""

from __future__ import annotations

import json
from typing import Any

from rollcli.tracking.service_tracker import ServiceTracker
from rollcli.tracking.tracker_values import quiet


class SwanLabTracker(ServiceTracker):
    service = "swanlab"

    def _start(self) -> Any:
        import swanlab

        folder = self.run_dir / "swanlab"
        folder.mkdir(parents=True, exist_ok=True)
        settings = swanlab.Settings(
            interactive=False,
            terminal=swanlab.Settings.Terminal(proxy_type="none"),  # leave our display alone
            # no hardware monitor thread; no pip-freeze requirements list (5 s at each start)
            probe=swanlab.Settings.Probe(monitor=False, requirements=False),
        )
        with quiet(self.log_file):
            return swanlab.init(
                mode=self.mode,
                log_dir=str(folder),
                project=self.project,
                name=self.run_id,
                group=self.run_id,
                config=self.recipe,
                settings=settings,
                reinit=True,
            )

    def _samples(self, rows: list[dict[str, Any]]) -> list[Any]:
        """One text per sample (its JSON), captioned with its reward."""
        import swanlab

        return [
            swanlab.Text(json.dumps(row, default=str), caption=f"reward {row.get('reward', '-')}")
            for row in rows
        ]

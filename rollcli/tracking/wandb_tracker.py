"""Weights & Biases: offline into `runs/<id>/wandb/` by default, online with
`WANDB_API_KEY` when the run asks for it (docs/runs.md). The `wandb` extra.

Offline runs are W&B's own `offline-run-*/run-*.wandb` files, which `wandb sync DIR`
uploads later. A W&B run only moves forward in steps, so `rewind` past logged steps
finishes this W&B run and starts a new one (same name and group): each holds every step
once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rollcli.config.trackers import wants_online
from rollcli.tracking.tracker_values import quiet, scalars


class WandbTracker:
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
        self.mode = "online" if wants_online("wandb", mode) else "offline"
        self.last_step = -1
        self.run = self._start()

    def _start(self) -> Any:
        import wandb

        settings = wandb.Settings(
            silent=True,
            console="off",  # leave our display alone
            x_disable_stats=True,
            save_code=False,
        )
        with quiet(self.log_file):
            return wandb.init(
                dir=str(self.run_dir),
                mode=self.mode,
                project=self.project,
                name=self.run_id,
                group=self.run_id,
                config=self.recipe,
                settings=settings,
                reinit="create_new",
            )

    def log(self, metrics: dict[str, Any], step: int) -> None:
        values = scalars(metrics)
        if values:
            self.run.log(values, step=step)
        self.last_step = max(self.last_step, step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """A `wandb.Table` of the step's samples, one column per field."""
        import wandb

        if not rows:
            return
        columns, data = table_data(rows)
        self.run.log({"samples": wandb.Table(columns=columns, data=data)}, step=step)
        self.last_step = max(self.last_step, step)

    def rewind(self, step: int) -> None:
        if self.last_step > step:
            with quiet(self.log_file):
                self.run.finish()
            self.run = self._start()
            self.last_step = -1

    def close(self) -> None:
        """Finish the run and wait for W&B's writer process: `finish` alone can return
        before the `.wandb` file holds every record."""
        import wandb

        with quiet(self.log_file):
            self.run.finish()
            wandb.teardown()


def table_data(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Columns and cells for a `wandb.Table`, which needs one type per column: numbers,
    text and booleans as they are, lists and dicts as JSON text, and a column that mixes
    types (or kinds of number and bool) as text throughout.

    >>> table_data([{"r": 1.0, "ok": True, "t": [1]}, {"r": 0, "ok": 1}])
    (['r', 'ok', 't'], [[1.0, 'True', '[1]'], [0, '1', None]])
    """
    columns = list(dict.fromkeys(k for row in rows for k in row))
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    for j in range(len(columns)):
        kinds = {_kind(r[j]) for r in cells if r[j] is not None}
        if len(kinds) > 1:
            for r in cells:
                r[j] = None if r[j] is None else str(r[j])
    return columns, cells


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, default=str)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    return "number" if isinstance(value, (int, float)) else "text"

"""Weights & Biases: offline into `runs/<id>/wandb/` by default, online with
`WANDB_API_KEY` when the run asks for it (docs/runs.md). The `wandb` extra.

Offline runs are W&B's own `offline-run-*/run-*.wandb` files, which `wandb sync DIR`
uploads later. What it shares with SwanLab (steps, rewind by a new run of the same name and
group): service_tracker.py.
"""

from __future__ import annotations

import json
from typing import Any

from rollcli.tracking.service_tracker import ServiceTracker
from rollcli.tracking.tracker_values import quiet


class WandbTracker(ServiceTracker):
    service = "wandb"

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

    def _samples(self, rows: list[dict[str, Any]]) -> Any:
        """A `wandb.Table` of the step's samples, one column per field."""
        import wandb

        names, data = table_data(rows)
        columns: list[str | int] = [*names]
        return wandb.Table(columns=columns, data=data)

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

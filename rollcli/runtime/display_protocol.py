"""What a pipeline tells its display (the CLI passes `rollcli.cli.display.RichDisplay`)."""

from __future__ import annotations

from typing import Any, Protocol


class Display(Protocol):
    def start(
        self,
        *,
        run_id: str,
        run_dir: str,
        total_steps: int,
        start_step: int,
        engine: str,
        eval_every: int = 0,  # run.eval_every: the validations to come, for the eta
    ) -> None: ...
    def phase(self, text: str) -> None: ...
    def generation(self, done: int, total: int) -> None: ...
    def step_done(self, step: int, metrics: dict[str, Any]) -> None: ...
    def message(self, text: str) -> None: ...
    def close(self) -> None: ...

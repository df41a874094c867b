"""What a pipeline tells its display. The CLI passes a rich display; tests a silent one."""

from __future__ import annotations

from typing import Any, Protocol


class Display(Protocol):
    def start(
        self, *, run_id: str, run_dir: str, total_steps: int, start_step: int, engine: str
    ) -> None: ...
    def phase(self, text: str) -> None: ...
    def generation(self, done: int, total: int) -> None: ...
    def step_done(self, step: int, metrics: dict[str, Any]) -> None: ...
    def message(self, text: str) -> None: ...
    def close(self) -> None: ...


class SilentDisplay:
    def start(self, **_: Any) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def generation(self, done: int, total: int) -> None:
        pass

    def step_done(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def message(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass

"""What a sandboxed run reports back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

Reason = Literal[
    "ok",
    "timeout",
    "memory",
    "syntax_error",
    "assertion",
    "runtime_error",
    "output_limit",
    "killed",
]
# every reason but ``ok``: why a program failed (the code reward's ``fail/<reason>`` metrics)
FAILURES: tuple[Reason, ...] = tuple(r for r in get_args(Reason) if r != "ok")


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one program.

    ``reason`` is ``ok`` when the program ran to the end (exit status 0);
    otherwise it names the first cause found, in this order: ``timeout`` (wall
    clock or CPU limit), ``output_limit``, then what the program itself raised
    (``syntax_error``, ``assertion``, ``memory``, ``runtime_error``), then
    ``killed`` (ended by a signal, e.g. a limit enforced by the kernel).
    """

    reason: Reason
    stdout: str
    stderr: str
    wall_time_s: float
    exit_code: int | None = None
    detail: str = ""
    isolation: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.reason == "ok"


@dataclass(frozen=True)
class TestResult:
    """Outcome of a program plus its test cases; ``reward`` is the pass fraction."""

    __test__ = False  # not a pytest class

    passed: int
    total: int
    run: SandboxResult
    verdicts: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reward(self) -> float:
        return self.passed / self.total if self.total else 0.0

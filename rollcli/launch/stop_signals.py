"""SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop: `timeout`, Slurm, Kubernetes) stop a
run the same way.

The first signal lets the step in flight finish, writes a checkpoint of it (unvalidated,
so the metrics stay those of the uninterrupted run), records `stopped (SIGTERM)` in
events.log and the run's status, and the command exits 128 + the signal's number (143 for
SIGTERM, 130 for SIGINT) with one line naming `roll resume RUN_ID`. A second signal, or
one before any worker started, stops at once (`StopNow`); a checkpoint being written
then is a temporary folder, never the newest checkpoint (runs/checkpoint.py).

A scheduler signals every process of the job at once: the workers ignore SIGTERM
(`distributed/process_control.survive_job_signals`) and a local Ray session's daemons
start with it blocked (`distributed/ray_session.sigterm_blocked`), so they are there to
write the checkpoint; `ray.init` replaces the driver's handler with its own (which exits),
so `install` runs again once Ray has started.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rollcli.runtime.display_protocol import Display

if TYPE_CHECKING:
    from rollcli.runtime.run_control import RunControl

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopNow(KeyboardInterrupt):
    """The run stops at once (a second signal); `signal` names the first one."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.signal = name


def exit_code(name: str | None) -> int:
    """128 + the signal's number, as a shell reports a process a signal ended.

    >>> exit_code("SIGTERM"), exit_code("SIGINT"), exit_code(None)
    (143, 130, 130)
    """
    return 128 + int(signal.Signals[name or "SIGINT"])


class StopSignals:
    """The handler of SIGINT and SIGTERM around a run (a context manager); `control()`
    gives the run's `RunControl` once it exists."""

    def __init__(self, control: Callable[[], RunControl | None], display: Display) -> None:
        self.control = control
        self.display = display
        self.received: list[str] = []
        self.previous: dict[int, Any] = {}
        self.pid = os.getpid()

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        for sig, old in self.previous.items():
            signal.signal(sig, old)
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, StopNow) and self.received:
            # the second signal's StopNow, re-raised as a plain KeyboardInterrupt by code it
            # passed through (`ray.get` does): it still names the first signal
            raise StopNow(self.received[0]) from None

    def install(self) -> None:
        """Take both signals (again: `ray.init` installs its own SIGTERM handler). Only the
        main thread can; elsewhere the process's own handlers stay."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in SIGNALS:
            old = signal.signal(sig, self._handle)
            self.previous.setdefault(sig, old)

    def _handle(self, signum: int, frame: Any) -> None:
        if os.getpid() != self.pid:  # a child forked by the driver, before its exec: the
            return  # job's signal reached it too; the driver answers for the run
        name = signal.Signals(signum).name
        self.received.append(name)
        ctl = self.control()
        if len(self.received) > 1 or ctl is None or not ctl.clusters:
            raise StopNow(self.received[0])
        ctl.request_stop(name)
        self.display.message(
            f"{name}: finishing step {ctl.current_step} and writing a checkpoint; a second "
            "signal stops at once"
        )

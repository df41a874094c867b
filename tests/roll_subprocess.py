"""Run the `roll` CLI as a user does: `python -m rollcli ARGS` in a subprocess.

Each run gets its own session, and the whole process group is SIGKILLed when it ends:
Ray's agents outlive a SIGKILLed driver, and must not leak into the next test.
Test modules import it as `from roll_subprocess import roll` (tests/conftest.py puts this
folder on sys.path).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def roll(
    *args: str,
    cwd: Path,
    fault: str = "",
    pythonpath: Path | None = None,
    timeout: float = 600,
    ctrl_c_when: Callable[[], bool] | None = None,
    stop_signal: int = signal.SIGINT,
) -> subprocess.CompletedProcess:
    """`fault`: ROLL_INJECT_FAULT for the run; `pythonpath`: a folder of test modules the
    workers import (e.g. a test reward); `ctrl_c_when`: polled while the run goes, and once
    it is true the process group gets Ctrl-C (SIGINT, as a terminal sends; `stop_signal`:
    another, e.g. SIGTERM as `timeout` and Slurm send)."""
    env = {
        **os.environ,
        "RAY_DISABLE_DOCKER_CPU_WARNING": "1",
        "COLUMNS": "200",
        "ROLL_INJECT_FAULT": fault,
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), os.environ.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "rollcli", *args]
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        if ctrl_c_when is not None:
            while proc.poll() is None and not ctrl_c_when():
                time.sleep(0.1)
            if proc.poll() is None:
                os.killpg(proc.pid, stop_signal)
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(command, proc.returncode, out, err)

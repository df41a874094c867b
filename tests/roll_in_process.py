"""Run the `roll` CLI app in this process, on the suite's one Ray session (tests/conftest.py):
for runs after a module's subprocess one, where a subprocess each would only add its own
Python and Ray start-up (~10 s). Test modules import it as
`from roll_in_process import cli`."""

from __future__ import annotations

import os
from contextlib import contextmanager


def kills_driver(fault: str) -> bool:
    """Whether `fault` (a ROLL_INJECT_FAULT spec) SIGKILLs the driver: a `kill@` fault."""
    from rollcli.runs.faults import parse_faults

    return any(f.action == "kill" for f in parse_faults(fault))


@contextmanager
def _fault(fault: str):
    """`ROLL_INJECT_FAULT` for the run (the driver reads it: a `kill-worker@...` fault kills
    a worker's process; a `kill@...` fault would kill this process, so it is refused)."""
    if kills_driver(fault):
        raise ValueError("a kill@ fault kills the driver: run it with roll_subprocess.roll")
    before = os.environ.get("ROLL_INJECT_FAULT")
    os.environ["ROLL_INJECT_FAULT"] = fault
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ROLL_INJECT_FAULT", None)
        else:
            os.environ["ROLL_INJECT_FAULT"] = before


def cli(*args: str, fault: str = "") -> tuple[int, str]:
    """`roll ARGS` in this process: (exit code, stderr)."""
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    with _fault(fault):
        result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr

"""Run the `roll` CLI app in this process, on the suite's one Ray session (tests/conftest.py):
for runs after a module's subprocess one, where a subprocess each would only add its own
Python and Ray start-up (~10 s). Test modules import it as
`from roll_in_process import cli`."""

from __future__ import annotations

import os
from unittest import mock


def kills_driver(fault: str) -> bool:
    """Whether `fault` (a ROLL_INJECT_FAULT spec) SIGKILLs the driver: a `kill@` fault."""
    from rollcli.runs.faults import parse_faults

    return any(f.action == "kill" for f in parse_faults(fault))


def cli(*args: str, fault: str = "") -> tuple[int, str]:
    """`roll ARGS` in this process: (exit code, stderr)."""
    from typer.testing import CliRunner

    from rollcli.cli.app import app

    # the driver reads ROLL_INJECT_FAULT: a `kill-worker@` fault kills a worker's process; a
    # `kill@` fault would kill this process, so it is refused
    if kills_driver(fault):
        raise ValueError("a kill@ fault kills the driver: run it with roll_subprocess.roll")
    with mock.patch.dict(os.environ, {"ROLL_INJECT_FAULT": fault}):
        result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stderr

"""The built-in `python` tool: run a model-written program in roll's code sandbox.

Each call is a fresh program in `rollcli.rewards.sandbox` (its own namespaces, no network,
a read-only root, rlimits and a cgroup; docs/sandbox.md), bounded by the tool's time and
memory limits. What the program prints is the result; a program that fails (an exception,
a syntax error, the memory limit) raises `ToolError` with its traceback, and one that runs past the
time limit raises `TimeoutError`, so the environment turns both into error observations.
No state is kept between calls: a later call does not see an earlier call's variables.

The sandbox refuses to run where the kernel cannot isolate a program, so asking for this
tool on such a machine fails when the tool is built, not on the model's first call.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rollcli.envs.tools.tool import ToolError
from rollcli.rewards.sandbox import SandboxLimits, detect_isolation, isolation_summary, run_program

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MEMORY_MB = 256
OUTPUT_BYTES = 64 * 1024  # kept from stdout and stderr each (the env truncates further)


def python_tool(
    timeout_s: float = DEFAULT_TIMEOUT_S, memory_mb: int = DEFAULT_MEMORY_MB
) -> Callable[[str], str]:
    """The `python` tool function with these limits (wall clock and CPU time, memory)."""
    if not detect_isolation()["strong"]:
        raise ValueError(
            f"tool 'python' runs code in roll's sandbox, which cannot isolate programs here "
            f"({isolation_summary()}); leave it out of agentic.env_kwargs.tools"
        )
    limits = SandboxLimits(
        wall_timeout_s=timeout_s,
        cpu_time_s=max(1, math.ceil(timeout_s)),
        memory_mb=memory_mb,
        max_output_bytes=OUTPUT_BYTES,
    )

    def python(code: str) -> str:
        """Run a Python program and return what it prints. Each call starts afresh.

        Args:
            code: a complete Python program; print() the values you want to see
        """
        result = run_program(code, limits=limits)
        if result.reason == "timeout":
            raise TimeoutError(f"the program ran past the {timeout_s:g} s limit")
        if not result.ok:
            raise ToolError(
                (result.stdout + result.stderr).strip() or result.detail or result.reason
            )
        return result.stdout

    return python

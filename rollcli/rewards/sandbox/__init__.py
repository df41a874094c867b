"""Run untrusted, model-written Python safely; score it against tests.

Each program runs in its own process inside fresh network, mount and pid
namespaces (where the kernel allows), on a read-only root with a private
tmpfs folder, as an unprivileged uid, under rlimits and a per-run cgroup.
See docs/sandbox.md for the threat model.
"""

from .api import Job, run_humaneval, run_many, run_program, run_tests
from .code_reward import code_reward, extract_code
from .detect import detect_isolation, isolation_summary
from .limits import SandboxLimits
from .process import SandboxError, SandboxUnavailable
from .results import FAILURES, Reason, SandboxResult, TestResult

__all__ = [
    "FAILURES",
    "Job",
    "Reason",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailable",
    "TestResult",
    "code_reward",
    "detect_isolation",
    "extract_code",
    "isolation_summary",
    "run_humaneval",
    "run_many",
    "run_program",
    "run_tests",
]

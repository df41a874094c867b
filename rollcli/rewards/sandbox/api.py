"""Public entry points: run a program, run it against tests, run many at once."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .harness import judge
from .limits import SandboxLimits
from .process import RawRun, Session, execute, program_report
from .results import Reason, SandboxResult, TestResult

_DEFAULT = SandboxLimits()


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _classify(raw: RawRun) -> tuple[Reason, int | None, str]:
    """(reason, exit code, detail) from what the sandbox reported."""
    program = raw.program
    code = sig = None
    if raw.wait_status is not None:
        if os.WIFEXITED(raw.wait_status):
            code = os.WEXITSTATUS(raw.wait_status)
        elif os.WIFSIGNALED(raw.wait_status):
            sig = os.WTERMSIG(raw.wait_status)
    if raw.timed_out or sig == signal.SIGXCPU:
        if raw.oom_killed:
            return "memory", code, "a process was killed by the memory cgroup"
        return "timeout", code, "wall-clock or CPU time limit reached"
    if raw.output_limit:
        return "output_limit", code, "output exceeded max_output_bytes"
    if program is not None and program.get("kind") != "ok":
        return str(program.get("kind")), code, str(program.get("detail", ""))
    if raw.oom_killed:
        return "memory", code, "killed by the memory cgroup"
    if sig is not None:
        return "killed", code, f"killed by signal {signal.Signals(sig).name}"
    if raw.wait_status is None:
        return "killed", code, "the sandbox ended before the program reported"
    if code != 0:
        return "runtime_error", code, f"exit status {code}"
    return "ok", code, ""


def _result(raw: RawRun) -> SandboxResult:
    reason, code, detail = _classify(raw)
    return SandboxResult(
        reason=reason,
        stdout=_text(raw.stdout),
        stderr=_text(raw.stderr),
        wall_time_s=raw.wall_time_s,
        exit_code=code,
        detail=detail,
        isolation=raw.isolation,
    )


def run_program(code: str, *, stdin: str = "", limits: SandboxLimits = _DEFAULT) -> SandboxResult:
    """Run Python ``code`` as ``__main__`` in a fresh sandbox.

    >>> run_program("print(6 * 7)").stdout
    '42\\n'
    >>> run_program("print(input()[::-1])", stdin="abc").stdout
    'cba\\n'
    >>> run_program("def f(:").reason
    'syntax_error'
    """
    return _result(execute(code, stdin, limits))


def run_tests(
    program: str, tests: str | list[str], *, limits: SandboxLimits = _DEFAULT
) -> TestResult:
    """Run ``program`` in a sandbox, then each test snippet here against it.

    The tests run in this process and call the program's functions through
    proxies (:mod:`.harness`), so only this side decides a verdict. A test
    passes when it runs to its end without raising; the reward is the fraction
    that passed. A string holds one test per non-blank line.

    >>> r = run_tests("def sq(x): return x * x", ["assert sq(2) == 4", "assert sq(3) == 10"])
    >>> (r.passed, r.total, r.reward)
    (1, 2, 0.5)
    """
    cases = [t for t in tests.splitlines() if t.strip()] if isinstance(tests, str) else list(tests)
    session = Session(program, "", limits)
    try:
        report = session.raw.program = program_report(session.receive())
        program_ok = report is not None and report.get("kind") == "ok"
        kinds = judge(session, report.get("names"), cases) if program_ok else [None] * len(cases)
    finally:
        raw = session.finish()
    run = _result(raw)
    missing = run.reason if run.reason != "ok" else "no_verdict"
    verdicts = tuple(k or missing for k in kinds)
    passed = sum(k == "ok" for k in verdicts)
    return TestResult(passed=passed, total=len(cases), run=run, verdicts=verdicts)


def run_humaneval(
    prompt: str,
    completion: str,
    test: str,
    entry_point: str,
    *,
    limits: SandboxLimits = _DEFAULT,
) -> TestResult:
    """Score a HumanEval-style task: ``prompt + completion`` is the program and
    ``test`` defines ``check(candidate)``, called with ``entry_point``."""
    return run_tests(prompt + completion, [f"{test}\ncheck({entry_point})\n"], limits=limits)


@dataclass(frozen=True)
class Job:
    """One program for :func:`run_many`: tests ``None`` runs it plainly."""

    code: str
    tests: str | list[str] | None = None
    stdin: str = ""
    limits: SandboxLimits = _DEFAULT


def run_many(
    jobs: Iterable[Job | str],
    max_workers: int | None = None,
    *,
    on_done: Callable[[int], None] | None = None,
) -> list[SandboxResult | TestResult]:
    """Run many jobs in parallel (threads, each driving its own sandbox process).

    Results come back in the order of ``jobs``: a :class:`TestResult` for a
    job with tests, else a :class:`SandboxResult`. ``max_workers`` defaults to
    the CPU count.
    """
    items = [Job(j) if isinstance(j, str) else j for j in jobs]

    def one(i: int) -> SandboxResult | TestResult:
        job = items[i]
        if job.tests is None:
            out: SandboxResult | TestResult = run_program(
                job.code, stdin=job.stdin, limits=job.limits
            )
        else:
            out = run_tests(job.code, job.tests, limits=job.limits)
        if on_done is not None:
            on_done(i)
        return out

    workers = max_workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as pool:
        return list(pool.map(one, range(len(items))))

"""The `code` reward: the fraction of a sample's tests its program passes in the sandbox.

A sample names its tests in one of two ways:
- fields `tests` (assert lines: a list, or a string with one per line) and optionally
  `entry_point` + `stub` (HumanEval style: `tests` defines `check(candidate)`, and `stub` is
  the function's signature and docstring the model was asked to complete);
- `answer` holding the same keys as a JSON object (how prompt files and the HumanEval source
  carry them through training, where a sample has `response`, `answer`, `tag`, `prompt`);
- with the option `test_format: pytest`, `answer` (or `tests`) is a pytest module that
  imports the program as `solution` (KodCode's `test` column, `data.answer_key: test`):
  each test function is one test (`rollcli.rewards.pytest_tests`).

All the batch's programs run in parallel, each in its own sandbox process with its own
limits (`rollcli.rewards.sandbox`), so one slow or hostile program never holds up or harms
the others. The result says why a program failed: `reason` (`ok`, `timeout`, `memory`,
`syntax_error`, `assertion`, `runtime_error`, `output_limit`, `killed`) and `detail`, and
one 0/1 metric per failure kind (`fail/<reason>`, so `reward/fail/timeout` is the fraction
of programs that timed out).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Literal

from rollcli.rewards.pytest_tests import PytestModuleError, pytest_snippets
from rollcli.rewards.registry import reward_options
from rollcli.rewards.runner import batch_reward
from rollcli.rewards.sandbox import FAILURES, Job, SandboxLimits, extract_code, run_many


class CodeSpecError(ValueError):
    """A sample does not say which tests to run."""


def pytest_spec(sample: dict[str, Any]) -> dict[str, Any]:
    """The spec of a sample whose tests are a pytest module (`test_format: pytest`).

    >>> len(pytest_spec({"answer": "from solution import f\\ndef test_f():\\n    assert f()"})["tests"])
    1
    """
    source = sample.get("tests") or sample.get("answer")
    if not isinstance(source, str) or not source.strip():
        raise CodeSpecError(
            "test_format is 'pytest' but the sample has no tests: set data.answer_key to the "
            "column holding the pytest module (KodCode's `test`)"
        )
    try:
        return {"tests": pytest_snippets(source), "entry_point": None, "stub": None}
    except PytestModuleError as exc:
        raise CodeSpecError(str(exc)) from None


def code_spec(sample: dict[str, Any]) -> dict[str, Any]:
    """`{"tests", "entry_point", "stub"}` from the sample's fields or its JSON `answer`.

    >>> code_spec({"tests": ["assert f() == 1"]})["tests"]
    ['assert f() == 1']
    >>> code_spec({"answer": '{"tests": "assert f() == 1", "entry_point": "f"}'})["entry_point"]
    'f'
    """
    spec: Any = sample
    if "tests" not in sample:
        answer = sample.get("answer")
        if not answer:
            raise CodeSpecError(
                "the code reward needs 'tests' (assert lines, or a check(candidate) source "
                "with 'entry_point'), or 'answer' holding them as a JSON object"
            )
        try:
            spec = json.loads(answer) if isinstance(answer, str) else answer
        except json.JSONDecodeError:
            raise CodeSpecError(
                "'answer' is not a JSON object with 'tests' (the code reward reads its tests "
                f"from it): {str(answer)[:80]!r}"
            ) from None
        if not isinstance(spec, dict) or "tests" not in spec:
            raise CodeSpecError("'answer' is JSON but has no 'tests' key")
    tests = spec["tests"]
    if not isinstance(tests, (str, list)) or not tests:
        raise CodeSpecError("'tests' must be a non-empty string or list of strings")
    return {"tests": tests, "entry_point": spec.get("entry_point"), "stub": spec.get("stub")}


def assemble_program(response: str, stub: str | None, entry_point: str | None) -> str:
    """The program to run: the response's code, completed from `stub` when it has one.

    A response that defines `entry_point` itself replaces the stub's function (the stub's
    imports and helpers before it are kept); otherwise it is taken as the function's body.

    >>> stub = "import math\\n\\ndef f(x):\\n    '''twice x'''\\n"
    >>> print(assemble_program("    return 2 * x\\n", stub, "f"))
    import math
    <BLANKLINE>
    def f(x):
        '''twice x'''
        return 2 * x
    <BLANKLINE>
    >>> print(assemble_program("```python\\ndef f(x):\\n    return x + x\\n```", stub, "f"))
    import math
    <BLANKLINE>
    def f(x):
        return x + x
    <BLANKLINE>
    """
    code = extract_code(response)
    if not stub:
        return code
    if entry_point and re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.M):
        head = re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", stub, re.M)
        return (stub[: head.start()] if head else "") + code
    return stub + code


def _tests(spec: dict[str, Any]) -> list[str]:
    tests, entry = spec["tests"], spec["entry_point"]
    if entry:  # HumanEval style: one test calling check(candidate)
        text = tests if isinstance(tests, str) else "\n".join(tests)
        return [f"{text}\ncheck({entry})\n"]
    return [t for t in tests.splitlines() if t.strip()] if isinstance(tests, str) else list(tests)


def _result(test_result: Any) -> dict[str, Any]:
    run = test_result.run
    passed_all = test_result.total > 0 and test_result.passed == test_result.total
    reason = "ok" if passed_all else _failure(test_result)
    detail = "" if passed_all else (run.detail or run.stderr.strip()[-300:])
    out: dict[str, Any] = {
        "score": test_result.reward,
        "passed": float(test_result.passed),
        "total": float(test_result.total),
        "correct": float(passed_all),
        "reason": reason,
        "detail": detail,
        "program_s": run.wall_time_s,
    }
    out.update({f"fail/{kind}": float(reason == kind) for kind in FAILURES})
    return out


def _failure(test_result: Any) -> str:
    """Why a program did not pass every test: the run's reason, else the first failed test's."""
    if test_result.run.reason != "ok":
        return test_result.run.reason
    failed = [v for v in test_result.verdicts if v != "ok"]
    return failed[0] if failed and failed[0] in FAILURES else "assertion"


@reward_options("max_workers", "memory_mb", "allow_weak_isolation", "test_format")
@batch_reward
def code_reward(
    samples: list[dict[str, Any]],
    *,
    timeout_s: float = 10.0,
    max_workers: int | None = None,
    memory_mb: int = 1024,
    allow_weak_isolation: bool = False,
    test_format: Literal["asserts", "pytest"] = "asserts",
    **_: Any,
) -> list[dict[str, Any]]:
    """Score every sample's program against its tests, all programs in parallel.

    `timeout_s` is each program's wall-clock (and CPU-time) limit; `max_workers` how many
    sandboxes run at once (default: the CPU count); `test_format: pytest` reads each
    sample's tests as a pytest module (KodCode's). A sample without tests gets an error;
    the others still run.
    """
    limits = SandboxLimits(
        wall_timeout_s=timeout_s,
        cpu_time_s=max(1, math.ceil(timeout_s)),
        memory_mb=memory_mb,
        allow_weak_isolation=allow_weak_isolation,
    )
    results: list[dict[str, Any] | None] = [None] * len(samples)
    jobs, where = [], []
    for i, sample in enumerate(samples):
        try:
            spec = pytest_spec(sample) if test_format == "pytest" else code_spec(sample)
        except CodeSpecError as exc:
            results[i] = {"score": 0.0, "error": str(exc)}
            continue
        program = assemble_program(sample["response"], spec["stub"], spec["entry_point"])
        jobs.append(Job(program, tests=_tests(spec), limits=limits))
        where.append(i)
    for i, test_result in zip(where, run_many(jobs, max_workers), strict=True):
        results[i] = _result(test_result)
    return [r for r in results if r is not None]

"""What the sandbox reports for ordinary programs, and how tests are scored."""

from __future__ import annotations

import doctest
import importlib

import pytest

from rollcli.rewards import sandbox
from rollcli.rewards.sandbox import (
    Job,
    SandboxLimits,
    SandboxUnavailable,
    code_reward,
    detect_isolation,
    run_humaneval,
    run_many,
    run_program,
    run_tests,
)


def test_ok_program_captures_stdout_stdin_and_isolation():
    r = run_program("import sys\nprint(sys.stdin.read().upper())", stdin="hi")
    assert (r.reason, r.ok, r.stdout, r.exit_code) == ("ok", True, "HI\n", 0)
    assert {"net_ns", "mount_ns", "rlimits"} <= set(r.isolation)
    assert 0 < r.wall_time_s < 5


@pytest.mark.parametrize(
    ("code", "reason", "detail"),
    [
        ("def f(:\n  pass", "syntax_error", "SyntaxError"),
        ("if True:\nprint(1)", "syntax_error", "IndentationError"),
        ("assert 1 + 1 == 3, 'math'", "assertion", "math"),
        ("{}['missing']", "runtime_error", "KeyError"),
        ("import sys; sys.exit(4)", "runtime_error", "SystemExit(4)"),
        ("import sys; sys.exit(0)", "ok", ""),
        ("import os; os._exit(3)", "runtime_error", "exit status 3"),
        ("x = b'y' * (2 << 30)", "memory", "MemoryError"),
    ],
)
def test_failure_reasons(code, reason, detail):
    r = run_program(code, limits=SandboxLimits(memory_mb=512))
    assert r.reason == reason
    assert detail in r.detail


def test_runtime_error_keeps_traceback_without_harness_frames():
    r = run_program("def f():\n    raise ValueError('boom')\nf()")
    assert "ValueError: boom" in r.stderr and 'File "main.py", line 2' in r.stderr
    assert "roll_runner" not in r.stderr


def test_rewards_full_half_and_zero():
    prog = "def add(a, b):\n    return a + b if a < 10 else 0\n"
    assert run_tests(prog, ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]).reward == 1.0
    half = run_tests(prog, "assert add(1, 2) == 3\nassert add(20, 2) == 22\n")
    assert (half.passed, half.total, half.reward) == (1, 2, 0.5)
    assert half.verdicts == ("ok", "assertion")
    broken = run_tests("def add(a, b) return a", ["assert add(1, 2) == 3"])
    assert broken.reward == 0.0 and broken.run.reason == "syntax_error"


def test_humaneval_style_check():
    prompt = 'def inc(x: int) -> int:\n    """Add one."""\n'
    test = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"
    assert run_humaneval(prompt, "    return x + 1\n", test, "inc").reward == 1.0
    assert run_humaneval(prompt, "    return x\n", test, "inc").reward == 0.0


def test_exit_and_forged_verdict_hacks_earn_nothing():
    tests = ["assert solve() == 42"]
    # sys.exit(0) before the tests: the harness catches it and still runs them
    assert run_tests("def solve(): return 0\nimport sys; sys.exit(0)", tests).reward == 0.0
    # os._exit(0) skips the tests entirely: no verdict, no reward
    assert run_tests("import os; os._exit(0)", tests).reward == 0.0
    forged = "import os, json\nfor fd in (1, 2, 4):\n"
    forged += '    os.write(fd, b\'x verdict {"step": "test0", "kind": "ok"}\\n\')\n'
    forged += "os._exit(0)\n"
    assert run_tests(forged, tests).reward == 0.0


def test_values_exceptions_and_functions_cross_as_plain_data():
    prog = (
        "def parts(x):\n    return (x, {x: [x]}, {x}, b'x', 1j, None)\n"
        "def check_positive(x):\n    if x < 0: raise ValueError('negative')\n    return x\n"
        "def apply(f, x):\n    return f(x)\n"
        "LIMIT = [1, 2]\n"
        "def len(x):\n    return 0\n"
    )
    tests = [
        "assert parts(2) == (2, {2: [2]}, {2}, b'x', 1j, None)",
        "try:\n    check_positive(-1)\n    assert False\nexcept ValueError as e:\n    assert 'negative' in str(e)",
        "assert apply(check_positive, 3) == 3",
        "assert LIMIT == [1, 2]",
        "assert len([1]) == 1",  # the program's `len` never replaces the built-in for tests
        "assert parts(2) == (3,)",
    ]
    r = run_tests(prog, tests)
    assert r.verdicts == ("ok", "ok", "ok", "ok", "ok", "assertion")


def test_unserialisable_result_fails_its_test_only():
    prog = "class Box:\n    pass\ndef box():\n    return Box()\ndef one():\n    return 1\n"
    r = run_tests(prog, ["assert box() is not None", "assert one() == 1"])
    assert r.verdicts == ("runtime_error", "ok")


def test_hidden_tests_are_not_on_disk_or_open_fds():
    probe = (
        "import os\n"
        "seen = os.listdir('/sandbox')\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try: seen.append(open('/proc/self/fd/' + fd, 'rb').read(65536))\n"
        "    except OSError: pass\n"
        "for root, _, files in os.walk('/sandbox'):\n"
        "    for f in files: seen.append(open(os.path.join(root, f)).read())\n"
        "print(seen)\n"
    )
    r = run_tests(probe, ["assert 'SECRET_EXPECTED_1234' != 0"])
    assert r.reward == 1.0
    assert "SECRET_EXPECTED_1234" not in r.run.stdout


def test_code_reward_extracts_last_block():
    response = (
        "Draft:\n```python\ndef f(): return 0\n```\nFinal:\n```python\ndef f(): return 1\n```"
    )
    assert code_reward(response, ["assert f() == 1"]) == 1.0
    assert code_reward("no code at all", ["assert f() == 1"]) == 0.0


def test_run_many_keeps_order_and_mixes_kinds():
    jobs = [Job(f"print({i})") for i in range(5)]
    jobs.append(Job("def f(): return 1", tests=["assert f() == 1", "assert f() == 2"]))
    out = run_many(jobs, max_workers=3)
    assert [r.stdout for r in out[:5]] == [f"{i}\n" for i in range(5)]
    assert out[5].reward == 0.5


def test_detect_isolation_keys():
    layers = detect_isolation()
    for key in ("user_namespace", "net_namespace", "mount_namespace", "pid_namespace"):
        assert isinstance(layers[key], bool)
    assert layers["seccomp"] is False


def test_weak_isolation_is_refused_by_default(monkeypatch):
    weak = {**detect_isolation(), "strong": False, "net_namespace": False}
    weak["mount_namespace"] = False
    monkeypatch.setattr(sandbox.process, "detect_isolation", lambda: weak)
    with pytest.raises(SandboxUnavailable, match="allow_weak_isolation"):
        run_program("print(1)")


@pytest.mark.parametrize("module", ["api", "code_reward", "limits", "runner"])
def test_doctests(module):
    mod = importlib.import_module(f"rollcli.rewards.sandbox.{module}")
    failures, tried = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)[:2]
    assert tried > 0 and failures == 0


def test_call_that_hangs_or_exits_fails_the_rest_with_the_runs_reason():
    prog = "import os\ndef spin():\n    while True:\n        pass\ndef leave():\n    os._exit(0)\n"
    quick = SandboxLimits(wall_timeout_s=1.5, cpu_time_s=2)
    hung = run_tests(prog, ["assert spin() == 1", "assert 1 == 1"], limits=quick)
    assert hung.verdicts == ("timeout", "timeout") and hung.run.reason == "timeout"
    gone = run_tests(prog, ["assert 1 == 1", "assert leave() == 1", "assert 2 == 2"])
    assert gone.verdicts == ("ok", "no_verdict", "no_verdict")

"""KodCode's pytest-style `test` column run against a program in the sandbox
(`code` with `test_format: pytest`): right 1, wrong 0, crashing 0, the run goes on."""

from __future__ import annotations

from rollcli.workers.reward import RewardArgs, RewardWorker

TESTS = """from solution import is_palindrome
import pytest

def test_yes():
    assert is_palindrome("abba")

def test_no_odd():
    assert not is_palindrome("abc")

@pytest.mark.parametrize("s, want", [("a", True), ("ab", False)])
def test_table(s, want):
    assert is_palindrome(s) is want

class TestEdge:
    def test_empty(self):
        assert is_palindrome("")
"""


def program(body: str) -> str:
    return f"Here it is:\n```python\ndef is_palindrome(s):\n    {body}\n```"


def test_kodcode_tests_score_real_programs():
    samples = [
        {"response": program("return s == s[::-1]"), "answer": TESTS, "tag": "code"},
        {"response": program("return s != s[::-1]"), "answer": TESTS, "tag": "code"},  # wrong
        {"response": program("return s[len(s)]"), "answer": TESTS, "tag": "code"},  # raises
        {"response": "import os\nos._exit(3)", "answer": TESTS, "tag": "code"},  # dies
        {"response": program("return True"), "answer": TESTS, "tag": "code"},  # half right
        {"response": program("return True"), "answer": "def helper(): pass", "tag": "code"},
    ]
    worker = RewardWorker(RewardArgs("code", options={"test_format": "pytest"}, timeout_s=5.0))
    results = worker.score(samples)
    assert [r["score"] for r in results[:5]] == [1.0, 0.0, 0.0, 0.0, 0.5]
    assert [r["total"] for r in results[:5]] == [4.0] * 5  # the table is one test
    assert [r["reason"] for r in results[:4]] == [
        "ok",
        "assertion",
        "runtime_error",
        "runtime_error",
    ]
    assert results[5]["score"] == 0.0 and "no test_* function" in results[5]["error"]

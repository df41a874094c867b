"""The `code` reward: sandboxed programs scored in parallel, failures explained."""

from __future__ import annotations

import json

from rollcli.data.prompts import humaneval_prompts
from rollcli.rewards.registry import load_reward_fn
from rollcli.workers.reward import RewardArgs, RewardWorker

ADD_TESTS = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0"]


def score(samples, **options):
    return RewardWorker(RewardArgs("code", options=options, timeout_s=3.0)).score(samples)


def test_pass_fraction_and_why_each_program_failed():
    samples = [
        {"response": "```python\ndef add(a, b):\n    return a + b\n```", "tests": ADD_TESTS},
        {"response": "def add(a, b):\n    return a * b", "tests": ADD_TESTS},  # passes 0+0 only
        {"response": "def add(a, b) return", "tests": ADD_TESTS},
        {"response": "import time\ntime.sleep(60)", "tests": ADD_TESTS},
        {"response": "x = ' ' * (4 << 30)", "tests": ADD_TESTS},
        {
            "response": "def add(a, b):\n    return a + b",
            "answer": json.dumps({"tests": ADD_TESTS}),
        },
    ]
    results = score(samples, max_workers=3)
    assert [r["score"] for r in results] == [1.0, 1 / 3, 0.0, 0.0, 0.0, 1.0]
    assert [r["reason"] for r in results] == [
        "ok",
        "assertion",
        "syntax_error",
        "timeout",
        "memory",
        "ok",
    ]
    assert [r["correct"] for r in results] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert results[3]["fail/timeout"] == 1.0 and results[3]["fail/memory"] == 0.0
    assert "SyntaxError" in results[2]["detail"]
    assert all(r["error"] is None for r in results)  # a failing program is not a reward error


def test_a_sample_without_tests_fails_alone():
    samples = [
        {"response": "def add(a, b): return a + b", "tests": ADD_TESTS},
        {"response": "def add(a, b): return a + b"},
        {"response": "x", "answer": "not json"},
    ]
    results = score(samples)
    assert results[0]["score"] == 1.0 and results[0]["error"] is None
    assert "needs 'tests'" in results[1]["error"]
    assert "not a JSON object" in results[2]["error"]


def test_humaneval_stub_completed_by_a_body_or_replaced_by_a_whole_function():
    problem = humaneval_prompts()[0]  # HumanEval/0 has_close_elements
    spec = json.loads(problem.answer)
    assert spec["entry_point"] == "has_close_elements"
    body = (
        "    for i, a in enumerate(numbers):\n"
        "        for b in numbers[i + 1:]:\n"
        "            if abs(a - b) < threshold:\n"
        "                return True\n"
        "    return False\n"
    )
    whole = (
        "Here you go:\n```python\ndef has_close_elements(numbers: List[float], threshold: float)"
        " -> bool:\n" + body + "```"
    )
    wrong = "```python\ndef has_close_elements(numbers, threshold):\n    return True\n```"
    results = score([{"response": r, "answer": problem.answer} for r in (body, whole, wrong)])
    assert [r["score"] for r in results] == [1.0, 1.0, 0.0]  # `List` comes from the stub's imports
    assert results[2]["reason"] == "assertion"


def test_the_registry_name_resolves_to_the_batch_reward():
    fn = load_reward_fn("code")
    assert getattr(fn, "batched", False)

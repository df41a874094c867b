from __future__ import annotations

import doctest
import time

import pytest

import rollcli.rewards.math_rule
from rollcli.rewards.math_rule import is_well_formatted, math_reward, verify_answer
from rollcli.rewards.registry import RewardNotFoundError, load_reward_fn
from rollcli.rewards.runner import score_samples
from rollcli.workers.reward import RewardArgs, RewardWorker


def test_doctests() -> None:
    assert doctest.testmod(rollcli.rewards.math_rule).failed == 0


@pytest.mark.parametrize(
    ("response", "answer", "correct"),
    [
        ("37 + 48 = 85", "85", True),
        ("The answer is \\boxed{85}.", "85", True),
        ("85.0", "85", True),
        ("It is -4", "-4", True),
        ("The answer is 84.", "85", False),
        ("I cannot tell.", "85", False),
        # the problem restated, with a wrong value: math-verify alone reads `5 + 8 + 8` and
        # evaluates it (RL on smollm2 learned this within 8 steps: 236 of 285 rewards)
        ("The final answer to this problem is 5 + 8 + 8 = 24.", "21", False),
        ("The answer is 5 + 8 + 8.", "21", False),
        ("The final answer is 5 + 8 + 8 = 21.", "21", True),
        ("5 + 8 = 13, 13 + 8 = 21.", "21", True),
        ("so x = 4 and the answer is \\boxed{3 - 2\\sqrt{2}}", "$3 - 2\\sqrt{2}$", True),
    ],
)
def test_verify_answer(response: str, answer: str, correct: bool) -> None:
    assert verify_answer(response, answer) is correct


def test_score_is_weighted_correctness_plus_format() -> None:
    # format_weight 0.2: correct and clean = 0.8 * 1 + 0.2 * 1; correct, rambling = 0.8
    assert math_reward("12", "12", format_weight=0.2)["score"] == pytest.approx(1.0)
    assert math_reward("12 is it, I think.", "12", format_weight=0.2)["score"] == pytest.approx(0.8)
    assert math_reward("13", "12", format_weight=0.2)["score"] == pytest.approx(0.2)
    assert not is_well_formatted("twelve")


def test_a_reply_cut_at_the_token_limit_earns_no_format_credit() -> None:
    """A reply that hit max_new_tokens ends wherever the cut fell: ending on a number there
    is no clean final answer. Correctness is still paid (0.9 = 1 - format_weight)."""
    cut = "Let me add them up: 37 + 48 = 85, then 85 + 12"
    assert math_reward(cut, "97", format_weight=0.1)["score"] == pytest.approx(0.1)
    assert math_reward(cut, "97", format_weight=0.1, finished=False) == {
        "score": 0.0, "correct": 0.0, "format": 0.0
    }  # fmt: skip
    assert math_reward("37 + 48 = 85", "85", finished=False)["score"] == pytest.approx(0.9)


def test_the_reward_worker_reads_finished_from_the_sample() -> None:
    """Training's samples say whether the reply finished (actor_infer sets it at the token
    limit); the worker passes it on, so a cut reply ending on a number scores 0."""
    worker = RewardWorker(RewardArgs("math", options={"format_weight": 0.1}))
    cut, done = (
        {"response": "12 + 30 = 42, and 42 + 8", "answer": "50", "finished": f}
        for f in (False, True)
    )
    assert [r["score"] for r in worker.score([cut, done])] == [0.0, pytest.approx(0.1)]


def _raises(response: str, answer: str, **_: object) -> float:
    raise RuntimeError("boom")


def _hangs(response: str, answer: str, **_: object) -> float:
    time.sleep(30)
    return 1.0


def _nan(response: str, answer: str, **_: object) -> float:
    return float("nan")


def test_a_raising_hanging_or_nan_reward_scores_zero_and_reports_the_error() -> None:
    samples = [{"response": "1", "answer": "1"}]
    assert score_samples(_raises, samples, {}, 5.0)[0] == {
        "score": 0.0,
        "error": "_raises('1', '1') raised RuntimeError: boom",  # the call roll made
    }
    start = time.perf_counter()
    hung = score_samples(_hangs, samples, {}, 0.3)[0]
    assert hung["score"] == 0.0 and hung["error"].startswith("timeout")
    assert time.perf_counter() - start < 5
    assert "non-finite" in score_samples(_nan, samples, {}, 5.0)[0]["error"]


def test_reward_by_name_or_module_path() -> None:
    assert load_reward_fn("math") is math_reward
    assert load_reward_fn("rollcli.rewards.math_rule:math_reward") is math_reward
    with pytest.raises(RewardNotFoundError, match="did you mean 'math'"):
        load_reward_fn("maht")
    with pytest.raises(RewardNotFoundError, match="rollcli.rewards.math_rule has no 'nope'"):
        load_reward_fn("rollcli.rewards.math_rule:nope")


def test_reward_worker_scores_a_list_of_samples() -> None:
    worker = RewardWorker(RewardArgs("math", options={"format_weight": 0.1}))
    out = worker.score(
        [{"response": "7", "answer": "7", "tag": "math"}, {"response": "8", "answer": "7"}]
    )
    assert [o["score"] for o in out] == [pytest.approx(1.0), pytest.approx(0.1)]
    assert out[0]["correct"] == 1.0 and out[1]["error"] is None

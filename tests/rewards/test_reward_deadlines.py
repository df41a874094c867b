"""Every reward path has a deadline: a hanging reward scores 0 with a timeout error and the
caller goes on (issue #22, item 4)."""

from __future__ import annotations

import threading
import time

import pytest

from rollcli.rewards import runner
from rollcli.rewards.runner import batch_reward
from rollcli.workers.reward import RewardArgs, RewardWorker

HANG_S = 8.0  # long enough that a missing deadline fails the test, short enough to end


@batch_reward
def hanging_batch(samples, *, timeout_s, **_):
    time.sleep(HANG_S)
    return [1.0 for _ in samples]


def hanging_one(response, answer, **_):
    end = time.monotonic() + HANG_S
    while time.monotonic() < end:  # a pure-Python loop, not a sleep
        pass
    return 1.0


@pytest.fixture(autouse=True)
def no_grace(monkeypatch):
    monkeypatch.setattr(runner, "BATCH_GRACE_S", 0.0, raising=False)


def _score(worker, samples):
    start = time.monotonic()
    results = worker.score(samples)
    return results, time.monotonic() - start


def test_a_hanging_batch_reward_times_out_every_sample():
    worker = RewardWorker(RewardArgs(f"{__name__}:hanging_batch", timeout_s=0.3))
    results, elapsed = _score(worker, [{"response": "a"}, {"response": "b"}])
    assert elapsed < 4
    assert [r["score"] for r in results] == [0.0, 0.0]
    assert all(r["error"] == "timeout: batch reward took longer than 0.6 s" for r in results)


def test_off_the_main_thread_the_batch_still_stops_waiting():
    worker = RewardWorker(RewardArgs(f"{__name__}:hanging_batch", timeout_s=0.3))
    out: list = []
    thread = threading.Thread(
        target=lambda: out.append(_score(worker, [{"response": "a"}])), daemon=True
    )
    thread.start()
    thread.join(HANG_S + 2)
    results, elapsed = out[0]
    assert elapsed < 4 and results[0]["error"].startswith("timeout: batch reward")


def test_a_single_sample_reward_off_the_main_thread_has_a_deadline_too():
    worker = RewardWorker(RewardArgs(f"{__name__}:hanging_one", timeout_s=0.3))
    out: list = []
    thread = threading.Thread(
        target=lambda: out.append(_score(worker, [{"response": "a"}])), daemon=True
    )
    thread.start()
    thread.join(HANG_S + 2)
    results, elapsed = out[0]
    assert elapsed < 4 and results[0] == {
        "score": 0.0,
        "error": "timeout: reward took longer than 0.3 s",
    }


def test_mix_times_out_the_hanging_domain_and_scores_the_others():
    worker = RewardWorker(
        RewardArgs(
            "mix",
            options={"routes": {"math": "math", "slow": f"{__name__}:hanging_batch"}},
            timeout_s=1.0,
        )
    )
    RewardWorker(RewardArgs("math")).score(
        [{"response": "4", "answer": "4"}]
    )  # imports math_verify
    samples = [
        {"response": "so \\boxed{4}", "answer": "4", "tag": "math"},
        {"response": "x", "answer": "", "tag": "slow"},
    ]
    results, elapsed = _score(worker, samples)
    assert elapsed < 4
    assert results[0]["score"] == 1.0 and results[0]["error"] is None
    assert results[1]["score"] == 0.0
    assert results[1]["error"] == "slow: timeout: batch reward took longer than 1 s"

"""The reward runner's batch API: one call per batch, errors kept with their samples."""

from __future__ import annotations

import math

from rollcli.rewards.runner import batch_reward, is_batched, score_samples
from rollcli.workers.reward import RewardArgs, RewardWorker

CALLS: list[int] = []


@batch_reward
def lengths(samples, *, timeout_s, scale=1.0, **_):
    CALLS.append(len(samples))
    out = []
    for s in samples:
        if s["response"] == "bad":
            out.append({"score": 0.0, "error": "bad sample"})
        elif s["response"] == "nan":
            out.append(math.nan)
        else:
            out.append({"score": scale * len(s["response"]), "timeout": timeout_s})
    return out


@batch_reward
def broken(samples, **_):
    raise RuntimeError("judge down")


@batch_reward
def short(samples, **_):
    return [1.0]


def test_a_batch_reward_is_called_once_with_every_sample():
    CALLS.clear()
    assert is_batched(lengths) and not is_batched(len)
    samples = [{"response": "ab"}, {"response": "bad"}, {"response": "abcd"}, {"response": "nan"}]
    results = score_samples(lengths, samples, {"scale": 0.5}, timeout_s=3.0)
    assert CALLS == [4]
    assert [r["score"] for r in results] == [1.0, 0.0, 2.0, 0.0]
    assert [r["error"] for r in results[:3]] == [None, "bad sample", None]
    assert "non-finite" in results[3]["error"]
    assert results[0]["timeout"] == 3.0  # the runner's per-sample budget reaches the reward


def test_an_option_named_timeout_s_wins_over_the_runner_budget():
    results = score_samples(lengths, [{"response": "a"}], {"timeout_s": 7.0}, timeout_s=3.0)
    assert results[0]["timeout"] == 7.0


def test_a_batch_reward_that_raises_fails_every_sample_not_the_run():
    results = score_samples(broken, [{"response": "a"}, {"response": "b"}], {}, 1.0)
    assert [r["score"] for r in results] == [0.0, 0.0]
    assert all(r["error"] == "RuntimeError: judge down" for r in results)


def test_a_batch_reward_returning_the_wrong_count_is_an_error():
    results = score_samples(short, [{"response": "a"}, {"response": "b"}], {}, 1.0)
    assert all("1 results for 2 samples" in r["error"] for r in results)


def test_the_reward_worker_scores_batches_through_the_same_runner():
    worker = RewardWorker(
        RewardArgs("tests.rewards.test_runner_batch:lengths", options={"scale": 2.0})
    )
    assert [r["score"] for r in worker.score([{"response": "abc"}])] == [6.0]

"""Per-sample rewards through real Ray actors: actor_infer sends each sample to a reward
worker the moment it ends, so the first samples are scored while the rest still generate;
an aborted request returns no scores and leaves the engine idle."""

from __future__ import annotations

import time

import pytest
import ray

from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.reward import RewardArgs, RewardWorker

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6], [3, 8, 200, 11], [9]]
META = [{"answer": "7", "prompt": f"question {i}", "tag": ""} for i in range(len(PROMPTS))]
# every 11th token id ends a sample: samples end at many different steps
STOPS = tuple(range(0, 49152, 11))


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


@pytest.fixture(scope="module")
def clusters(tiny_model):
    """One engine and two reward workers for the module (each test leaves the engine idle:
    the tests check it)."""
    infer = Cluster(
        "actor_infer",
        ActorInferWorker,
        1,
        WorkerResources(num_cpus=0.5, monitor=True),
        lambda rank: ActorInferArgs(str(tiny_model), num_threads=1),
    )
    reward = Cluster(
        "reward", RewardWorker, 2, WorkerResources(num_cpus=0.25), lambda rank: RewardArgs("math")
    )
    yield infer, reward
    infer.kill()
    reward.kill()


def test_each_sample_is_scored_as_it_ends(clusters) -> None:
    infer, reward = clusters
    params = SamplingParams(n=4, max_new_tokens=200, temperature=4.0, seed=3, stop_token_ids=STOPS)
    out = ray.get(
        infer.workers[0].generate_request.remote(PROMPTS, params, "r0", reward.workers, META)
    )
    assert not out["aborted"]
    gens, scored = out["gens"], ray.get(out["scores"])
    assert len(gens) == len(scored) == 16
    for gen, s in zip(gens, scored, strict=True):
        # the reward saw this row's own response: math's score of it, recomputed here
        expected = ray.get(
            reward.workers[0].score.remote([{**META[gen["prompt_index"]], "response": gen["text"]}])
        )
        assert s["result"] == expected[0]
        assert s["start"] <= s["end"]
    lengths = [len(g["token_ids"]) for g in gens]
    assert min(lengths) < max(lengths) / 4  # some samples ended long before the last
    first = min(range(16), key=lambda i: scored[i]["start"])
    # the first sample scored ended early and was scored before the request's generation
    # ended: its reward overlapped the others' generation
    assert scored[first]["start"] < out["gen_end"]
    assert lengths[first] < max(lengths)


def test_an_aborted_request_returns_no_scores(clusters) -> None:
    infer, reward = clusters
    worker = infer.workers[0]
    params = SamplingParams(n=4, max_new_tokens=2000, temperature=1.0, seed=1)
    ref = worker.generate_request.remote(PROMPTS, params, "long", reward.workers, META)
    deadline = time.time() + 60
    while ray.get(worker.progress.options(concurrency_group="monitor").remote())[0] == 0:
        assert time.time() < deadline, "the request never started"
        time.sleep(0.05)
    worker.abort.options(concurrency_group="monitor").remote(["long"])
    out = ray.get(ref, timeout=60)
    assert out["aborted"] and out["gens"] is None and "scores" not in out
    # the engine is idle and serves the next request in full
    short = SamplingParams(n=1, max_new_tokens=5, temperature=0.0)
    after = ray.get(worker.generate_request.remote(PROMPTS, short, "next", reward.workers, META))
    assert all(len(g["token_ids"]) == 5 or g["finished"] for g in after["gens"])
    assert len(ray.get(after["scores"])) == 4
    assert ray.get(worker.progress.options(concurrency_group="monitor").remote()) == (0, 0)


def test_validation_after_an_aborted_request_generates_in_full(clusters) -> None:
    """An abort stops only its own request: a plain `generate` (validation) that follows
    an aborted request gets whole responses, not empty ones."""
    infer, reward = clusters
    worker = infer.workers[0]
    params = SamplingParams(n=4, max_new_tokens=2000, temperature=1.0, seed=1)
    # an id of its own: the engine remembers the ids it aborted (an abort may come first)
    ref = worker.generate_request.remote(PROMPTS, params, "long-2", reward.workers, META)
    deadline = time.time() + 60
    while ray.get(worker.progress.options(concurrency_group="monitor").remote())[0] == 0:
        assert time.time() < deadline, "the request never started"
        time.sleep(0.05)
    ray.get(worker.abort.options(concurrency_group="monitor").remote(["long-2"]))
    assert ray.get(ref, timeout=60)["aborted"]
    greedy = SamplingParams(n=1, max_new_tokens=5, temperature=0.0)
    rows = ray.get(worker.generate.remote(PROMPTS, greedy))
    assert len(rows) == 4
    assert all(len(r["token_ids"]) == 5 or (r["finished"] and r["token_ids"]) for r in rows)

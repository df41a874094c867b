"""The rollout scheduler with env workers as real Ray actors: in lockstep (the pipeline's
way) the episodes do not depend on timing. A row's logits change bitwise with the batch it is
in, and its sampled tokens with its place in the batch, so episodes are only repeatable
(and a resumed run exact) when the batches are."""

from __future__ import annotations

import time

import pytest
import ray
import torch

from rollcli.data.padding import pad_left, position_ids_from_mask
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import EpisodeSpec, Limits
from rollcli.rollout.episode_scheduler import ModelPolicy, play_episodes
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.env_worker import EnvArgs, EnvWorker

ENV_KWARGS = {"size": 3, "max_steps": 3}
STALL_S = 2.0  # how long the slow env worker is held: 40x the scheduler's gather_s


@ray.remote(num_cpus=0)
def _after(seconds: float) -> list[int]:
    time.sleep(seconds)
    return []


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


@pytest.fixture(scope="module")
def worker(tiny_model) -> ActorInferWorker:
    return ActorInferWorker(ActorInferArgs(str(tiny_model), session_mib=64))


def test_a_rows_logits_depend_on_its_batch(worker) -> None:
    """Why batches must be fixed: the same prompt's last logits differ (in the last bits)
    alone and beside a longer prompt (left padding, another batch size)."""
    prompts = [list(range(100, 140)), list(range(200, 270))]

    def last_logits(batch: list[list[int]]) -> torch.Tensor:
        ids, mask = pad_left(batch, 0)
        with torch.no_grad():
            out = worker.model(
                input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask)
            )
        return out.logits[0, -1]

    alone, beside = last_logits(prompts[:1]), last_logits(prompts)
    assert torch.allclose(alone, beside, atol=1e-4)
    assert not torch.equal(alone, beside)


@pytest.fixture(scope="module")
def hosts() -> list:
    actor = ray.remote(EnvWorker).options(num_cpus=0.1)
    hosts = [actor.remote(EnvArgs("frozenlake", ENV_KWARGS)) for _ in range(2)]
    yield hosts
    for host in hosts:
        ray.kill(host)


def _play(worker: ActorInferWorker, hosts: list, slow_host: int | None, lockstep: bool):
    """12 sampled episodes over 2 env-worker actors; `slow_host` is first held by a call
    whose argument resolves after STALL_S (an actor runs one submitter's calls in order), so
    its episodes' first observations arrive late."""
    fmt = TurnFormat(worker.tokenizer, ray.get(hosts[0].instructions.remote()), "<answer>")
    if slow_host is not None:
        hosts[slow_host].release.remote(_after.remote(STALL_S))
    specs = [EpisodeSpec(i, i // 3, 40 + i // 3) for i in range(12)]
    params = SamplingParams(max_new_tokens=4, temperature=1.0, seed=11)
    policy = ModelPolicy([worker], params, sessions=True)
    episodes, stats = play_episodes(
        hosts, policy, specs, fmt, Limits(3, 4096, 4), lockstep=lockstep
    )
    return [(ep.response_ids, ep.rewards, ep.end) for ep in episodes], stats


def test_lockstep_episodes_do_not_depend_on_which_env_worker_is_slow(worker, hosts) -> None:
    played = [_play(worker, hosts, slow, lockstep=True) for slow in (None, 0, 1)]
    (first, stats), *others = played
    assert sum(len(rewards) for _, rewards, _ in first) > 12  # later turns were played
    for episodes, other_stats in others:
        assert episodes == first
        assert other_stats["gen_calls"] == stats["gen_calls"]  # one call per turn round
    assert stats["gen_calls"] == max(len(rewards) for _, rewards, _ in first)


def test_without_lockstep_a_slow_env_worker_splits_the_batches(worker, hosts) -> None:
    """The asynchronous scheduler generates for the ready episodes at once: with one env
    worker late, the first turn runs as two batches and the sampled episodes change."""
    fast, fast_stats = _play(worker, hosts, None, lockstep=False)
    split, split_stats = _play(worker, hosts, 0, lockstep=False)
    assert split_stats["gen_calls"] > fast_stats["gen_calls"]
    assert split != fast

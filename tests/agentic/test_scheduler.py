"""The rollout scheduler and env workers, as plain objects (the code Ray runs as actors)."""

from __future__ import annotations

import pytest

from rollcli.envs.frozenlake import FrozenLakeEnv
from rollcli.pipelines.rl.episode_batch import episodes_to_batch
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import EpisodeSpec, Limits
from rollcli.rollout.episode_metrics import episode_metrics
from rollcli.rollout.episode_scheduler import ModelPolicy, play_episodes, random_policy
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.env_worker import EnvArgs, EnvWorker


class CrashyLake(FrozenLakeEnv):
    """FrozenLake whose odd seeds raise on the second step."""

    def step(self, action_text):  # noqa: ANN001, ANN201
        if self._steps == 1 and self.seed_used % 2:
            raise RuntimeError("the lake cracked")
        return super().step(action_text)

    def reset(self, *, seed=None, options=None):  # noqa: ANN001, ANN201
        self.seed_used = seed
        return super().reset(seed=seed, options=options)


CRASHY = f"{__name__}:CrashyLake"


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from rollcli.strategies.hf_model import load_tokenizer

    return load_tokenizer(tiny_model)


def test_random_policy_plays_whole_episodes_across_env_workers(tokenizer) -> None:
    hosts = [EnvWorker(EnvArgs("frozenlake", {"size": 3, "max_steps": 4})) for _ in range(2)]
    fmt = TurnFormat(tokenizer, hosts[0].instructions(), "<answer>")
    specs = [EpisodeSpec(i, i // 2, 100 + i // 2) for i in range(6)]
    episodes, stats = play_episodes(
        hosts, random_policy(0, "<answer>"), specs, fmt, Limits(4, 4096, 8)
    )
    assert [ep.spec for ep in episodes] == specs
    assert all(ep.done and 1 <= ep.turns <= 4 for ep in episodes)
    metrics = episode_metrics(episodes, "env")
    assert metrics["env/valid_action_rate"] == 1.0  # random *legal* actions, prefix re-joined
    assert all(ep.messages[2]["content"].startswith("<answer>") for ep in episodes)
    assert stats["gen_calls"] >= 4
    # episodes of a group share a seed, so they start from the same state
    assert episodes[0].state_keys[0] == episodes[1].state_keys[0]
    assert not any(h.envs for h in hosts)  # every env was released at its episode's end


def test_an_env_crash_ends_only_its_episode(tokenizer) -> None:
    hosts = [EnvWorker(EnvArgs(CRASHY, {"size": 3, "max_steps": 4, "p": 1.0}))]
    fmt = TurnFormat(tokenizer, hosts[0].instructions())
    specs = [EpisodeSpec(i, i, 10 + i) for i in range(4)]  # seeds 11 and 13 crash
    episodes, _ = play_episodes(hosts, random_policy(1), specs, fmt, Limits(4, 4096, 8))
    crashed = [ep for ep in episodes if ep.error]
    assert [ep.spec.seed for ep in crashed] == [11, 13]
    assert all("RuntimeError: the lake cracked" in ep.error for ep in crashed)
    assert all(ep.end == "error" and ep.turns == 2 for ep in crashed)
    assert all(ep.end != "error" for ep in episodes if ep.spec.seed % 2 == 0)
    assert episode_metrics(episodes, "env")["env/env_errors"] == 2.0
    assert episodes[1].record("frozenlake")["error"].startswith("RuntimeError")
    # crashed episodes are kept for the samples file but never trained on
    episodes_with_tokens = [ep for ep in episodes if ep.error is None]
    for ep in episodes_with_tokens:
        ep.response_ids, ep.loss_mask = [1], [1]
    assert len(episodes_to_batch(episodes, 0)) == 2


def test_bad_reset_is_contained_too() -> None:
    worker = EnvWorker(EnvArgs("frozenlake", {"size": 3}))
    worker.env_kwargs["size"] = 1  # the next env built for a slot fails
    out = worker.reset([(0, 1)])
    assert out[0]["error"].startswith("ValueError: size must be at least 2")
    assert worker.step({5: "<answer>Up</answer>"})[5]["error"].startswith("RuntimeError: slot 5")


def test_model_policy_replies_are_model_tokens(tokenizer, tiny_model) -> None:
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    worker = ActorInferWorker(ActorInferArgs(str(tiny_model)))
    hosts = [EnvWorker(EnvArgs("sokoban", {"max_steps": 2}))]
    fmt = TurnFormat(tokenizer, hosts[0].instructions())
    specs = [EpisodeSpec(i, 0, 5) for i in range(2)]
    policy = ModelPolicy([worker], SamplingParams(max_new_tokens=4, seed=3))
    episodes, stats = play_episodes(hosts, policy, specs, fmt, Limits(2, 4096, 4))
    for ep in episodes:
        assert ep.turns == 2 and ep.end == "truncated"  # sokoban's own max_steps
        assert sum(ep.loss_mask) == sum(b - a for a, b in ep.turn_spans)
        assert 2 <= sum(ep.loss_mask) <= 8
    assert stats["gen_batch_mean"] == 2.0  # both episodes ready together: one batch per turn


def test_turns_reuse_the_episode_kv_and_play_the_same_episodes(tokenizer, tiny_model) -> None:
    """The agentic chat builds each turn as an exact extension of the last, so with sessions
    every later turn prefills only its new tokens (no cache misses) and the greedy episodes
    are those of full re-prefills; the sessions are freed when the episodes end."""
    from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

    worker = ActorInferWorker(ActorInferArgs(str(tiny_model), session_mib=64))
    hosts = [EnvWorker(EnvArgs("frozenlake", {"max_steps": 3, "size": 3}))]
    fmt = TurnFormat(tokenizer, hosts[0].instructions(), "<answer>")
    specs = [EpisodeSpec(i, 0, 7 + i) for i in range(3)]
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    played = {}
    for sessions in (False, True):
        policy = ModelPolicy([worker], params, sessions=sessions)
        played[sessions] = play_episodes(hosts, policy, specs, fmt, Limits(3, 4096, 6))
    (plain, plain_stats), (cached, stats) = played[False], played[True]
    assert [ep.response_ids for ep in cached] == [ep.response_ids for ep in plain]
    assert sum(ep.turns for ep in cached) > len(cached)  # later turns were played
    assert stats["turn_cache_misses"] == 0 and "turn_cache_misses" not in plain_stats
    assert plain_stats["prefix_hit_tokens"] == 0
    total = plain_stats["prefill_tokens"]
    assert stats["prefill_tokens"] + stats["prefix_hit_tokens"] == total
    # each later turn reused the last turn's prompt and reply but the reply's last token
    reused = sum(len(ep.prompt_ids) + end - 1 for ep in cached for _, end in ep.turn_spans[:-1])
    assert stats["prefix_hit_tokens"] == reused
    assert not worker.engine.sessions.sessions  # freed when the episodes ended

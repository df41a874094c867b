"""The API contract, checked for every registered environment (including ones added later).

Every environment must accept `max_steps` and `format_penalty` keyword arguments, and
must treat ``<answer>definitely not a valid action</answer>`` as an invalid action.
"""

from __future__ import annotations

import pytest

from rollcli.envs.registry import env_names, make

INVALID = "Let me think... <answer>definitely not a valid action</answer>"
INFO_KEYS = {"action_is_valid", "action_is_effective", "success", "format_penalty"}
SEEDS = [0, 1, 7]


@pytest.fixture(params=env_names())
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def test_the_builtin_envs_are_registered() -> None:
    assert {"sokoban", "frozenlake"} <= set(env_names())


def test_descriptive_attributes(name: str) -> None:
    env = make(name)
    obs, info = env.reset(seed=0)
    assert isinstance(env.instructions, str) and env.instructions.strip()
    assert env.action_names and all(isinstance(a, str) and a for a in env.action_names)
    assert isinstance(obs, str) and obs
    assert isinstance(info, dict)
    assert env.render_text() == obs
    assert isinstance(env.get_state_key(), str)
    assert "\x1b" not in obs, "observations must not contain ANSI escapes"


def _rollout(name: str, seed: int) -> list[tuple]:
    """Reset with `seed` and cycle through the action names until the episode ends."""
    env = make(name, max_steps=12)
    obs, info = env.reset(seed=seed)
    trace: list[tuple] = [(obs, env.get_state_key())]
    for i in range(12):
        action = env.action_names[i % len(env.action_names)]
        obs, reward, terminated, truncated, info = env.step(f"<answer>{action}</answer>")
        assert isinstance(obs, str)
        assert isinstance(reward, float)
        assert type(terminated) is bool and type(truncated) is bool
        assert isinstance(info, dict) and set(info) >= INFO_KEYS
        for key in ("action_is_valid", "action_is_effective", "success"):
            assert type(info[key]) is bool, key
        assert isinstance(info["format_penalty"], float)
        trace.append((obs, reward, terminated, truncated, env.get_state_key(), info["success"]))
        if terminated or truncated:
            break
    return trace


@pytest.mark.parametrize("seed", SEEDS)
def test_step_types_and_determinism_under_a_seed(name: str, seed: int) -> None:
    assert _rollout(name, seed) == _rollout(name, seed)


def test_invalid_action_changes_nothing_but_costs_the_format_penalty(name: str) -> None:
    rewards = {}
    for penalty in (-0.1, -0.6):
        env = make(name, format_penalty=penalty)
        obs, _ = env.reset(seed=3)
        key = env.get_state_key()
        for text in (INVALID, "no answer tags at all", ""):
            _, reward, terminated, truncated, info = env.step(text)
            assert info["action_is_valid"] is False
            assert info["action_is_effective"] is False
            assert info["success"] is False
            assert info["format_penalty"] == penalty
            assert not terminated and not truncated
            assert env.get_state_key() == key
            assert env.render_text() == obs
        rewards[penalty] = reward
    assert rewards[-0.6] - rewards[-0.1] == pytest.approx(-0.5)


def test_episode_is_truncated_at_max_steps(name: str) -> None:
    env = make(name, max_steps=3)
    env.reset(seed=0)
    ends = [env.step(INVALID)[2:4] for _ in range(3)]
    assert ends == [(False, False), (False, False), (False, True)]
    env.reset(seed=0)
    assert env.step(INVALID)[3] is False

"""Validation layouts are disjoint from training layouts, over the seeds a run really uses."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.envs.frozenlake import FrozenLakeEnv
from rollcli.envs.layout_split import layout_split
from rollcli.envs.registry import build_env
from rollcli.rollout.agentic_setup import env_kwargs, train_specs, val_specs

STEPS = 100  # training steps whose seeds are checked (the recipes run 10 and 20)


def _layouts(env_name: str, kwargs: dict, seeds: list[int]) -> set[str]:
    env = build_env(env_name, kwargs)
    keys = set()
    for seed in seeds:
        env.reset(seed=seed)
        keys.add(env.layout_key())
    return keys


@pytest.mark.parametrize("recipe", ["agentic-frozenlake", "agentic-sokoban"])
def test_a_runs_validation_layouts_never_occur_in_its_training(recipe: str) -> None:
    cfg, _ = load_recipe(recipe, [])
    ag = cfg.agentic
    train_seeds = sorted(
        {s.seed for step in range(1, STEPS + 1) for s in train_specs(ag, cfg.seed, step)}
    )
    val_seeds = [s.seed for s in val_specs(ag.val_seed, ag.val_episodes)]
    train_kwargs, val_kwargs = env_kwargs(ag), env_kwargs(ag, validation=True)
    assert (train_kwargs["layouts"], val_kwargs["layouts"]) == ("train", "validation")
    train = _layouts(ag.env, train_kwargs, train_seeds)
    val = _layouts(ag.env, val_kwargs, val_seeds)
    assert len(val) >= 3 and len(train) > 10
    assert train.isdisjoint(val)
    assert {layout_split(k) for k in train} == {"train"}
    assert {layout_split(k) for k in val} == {"validation"}
    # without the split the same seeds share layouts (3x3 lakes and 6x6 rooms repeat)
    unsplit = {**train_kwargs, "layouts": "all"}
    assert _layouts(ag.env, unsplit, train_seeds) & _layouts(ag.env, unsplit, val_seeds)


def test_the_split_is_deterministic_and_a_fixed_map_is_used_as_given() -> None:
    a, b = FrozenLakeEnv(size=3, layouts="validation"), FrozenLakeEnv(size=3, layouts="validation")
    for seed in range(20):
        assert a.reset(seed=seed) == b.reset(seed=seed)
    fixed = FrozenLakeEnv(desc=["SF", "HG"], layouts="validation")
    assert fixed.reset(seed=0)[0] == "P_\nOG" and fixed.layout_key() is None


def test_a_family_without_validation_layouts_fails_clearly() -> None:
    env = FrozenLakeEnv(size=2, p=1.0, layouts="validation")  # one possible map: SF / FG
    with pytest.raises(RuntimeError, match="no validation layout in 1000 draws"):
        env.reset(seed=0)


def test_the_pipeline_sets_layouts_and_refuses_them_in_env_kwargs() -> None:
    with pytest.raises(ConfigError, match="layouts is set by the pipeline"):
        load_recipe("agentic-frozenlake", ["agentic.val_env_kwargs.layouts=all"])
    cfg, _ = load_recipe("webshop", [])
    assert "layouts" not in env_kwargs(cfg.agentic)  # webshop has its own split

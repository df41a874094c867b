"""`agentic.turn_cache_mib`: the hf engine's memory for episodes' KV between turns; refused
by name for the engines that cache prefixes by themselves."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.rollout.agentic_setup import turn_cache_mib


def test_the_hf_engine_gets_the_budget_and_the_others_none() -> None:
    default, _ = load_recipe("agentic-frozenlake")
    assert turn_cache_mib(default.agentic, "hf") == 1024.0
    assert turn_cache_mib(default.agentic, "vllm") == 0.0  # unset: vllm's own prefix cache
    off, _ = load_recipe("agentic-frozenlake", ["agentic.turn_cache_mib=0"])
    assert turn_cache_mib(off.agentic, "hf") == 0.0


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_setting_it_for_another_engine_is_an_error(engine: str) -> None:
    cfg, _ = load_recipe("agentic-sokoban", ["agentic.turn_cache_mib=256"])
    with pytest.raises(ConfigError, match=f"turn_cache_mib applies to the hf engine; the {engine}"):
        turn_cache_mib(cfg.agentic, engine)


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(ConfigError, match="turn_cache_mib"):
        load_recipe("agentic-frozenlake", ["agentic.turn_cache_mib=-1"])

"""The plan's line about partial rollouts: what `rollout.partial` does (its lead follows
`max_staleness`), a hint where replies are long, nothing otherwise or for agentic runs."""

from __future__ import annotations

from rollcli.config.loader import load_recipe
from rollcli.planning.partial_line import partial_line


def _line(recipe: str, *overrides: str) -> str | None:
    cfg, _ = load_recipe(recipe, list(overrides), {})
    return partial_line(cfg)


def test_the_line_says_what_partial_rollouts_do_and_where_they_pay() -> None:
    ahead = _line("rlvr-math", "rollout.partial=true", "rollout.max_staleness=2")
    after = _line("rlvr-math", "rollout.partial=true", "rollout.max_staleness=1")
    assert ahead is not None and "one step ahead" in ahead and "at most 2 updates" in ahead
    assert after is not None and "after each step" in after
    hint = _line("rlvr-math", "rollout.max_new_tokens=256")
    assert hint is not None and hint.startswith("replies up to 256 tokens: rollout.partial=true")
    assert _line("rlvr-math") is None  # 32 tokens: nothing to say
    assert _line("agentic-frozenlake", "rollout.max_new_tokens=256") is None

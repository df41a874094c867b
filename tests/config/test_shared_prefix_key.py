"""`train.shared_prefix`: on by default for rlvr, off for agentic and megatron, refused
where it cannot apply; it reaches the update's arguments."""

from __future__ import annotations

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.pipelines.rl.update_args import update_args


@pytest.mark.parametrize(
    ("recipe", "overrides", "expected"),
    [
        ("rlvr-math", [], True),
        ("rlvr-math", ["train.shared_prefix=false"], False),
        ("rlvr-math", ["train.strategy=deepspeed"], True),
        ("agentic-sokoban", [], True),
        ("agentic-sokoban", ["train.shared_prefix=false"], False),
        ("webshop", [], False),
    ],
)
def test_default_and_override_reach_the_update(recipe, overrides, expected) -> None:
    cfg, _ = load_recipe(recipe, overrides)
    assert cfg.shared_prefix is expected
    args = update_args(cfg)
    assert args.shared_prefix is expected
    assert args.forward_sizes()["shared_prefix"] is expected


@pytest.mark.parametrize(
    ("recipe", "override", "expected"),
    [
        ("sft", "train.shared_prefix=true", "train.shared_prefix applies to the RL pipelines"),
        ("dpo", "train.shared_prefix=true", "train.shared_prefix applies to the RL pipelines"),
        ("rlvr-math", "train.shared_prefx=true", "did you mean 'train.shared_prefix'?"),
    ],
)
def test_shared_prefix_is_refused_where_it_cannot_apply(recipe, override, expected) -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe(recipe, [override])
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_megatron_refuses_it() -> None:
    with pytest.raises(
        ConfigError, match="train.shared_prefix runs on train.strategy hf, fsdp2 or"
    ):
        load_recipe("rlvr-math", ["train.strategy=megatron", "train.shared_prefix=true"])

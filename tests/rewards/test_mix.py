"""The mix reward: samples routed by tag, per-domain metrics, and the config that sets it up."""

from __future__ import annotations

import json

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.workers.reward import RewardArgs, RewardWorker

ROUTES = {"math": "math", "general": "ifeval"}
LOWER = json.dumps({"constraints": [{"type": "lowercase"}, {"type": "no_commas"}]})


def test_each_tag_goes_to_its_reward_with_per_domain_metrics():
    samples = [
        {"response": "2 + 2 = 4", "answer": "4", "tag": "math"},
        {"response": "2 + 2 = 5", "answer": "4", "tag": "math"},
        {"response": "all small, here", "answer": LOWER, "tag": "general"},
        {"response": "x", "answer": "1", "tag": "poetry"},
    ]
    worker = RewardWorker(RewardArgs("mix", options={"routes": ROUTES, "format_weight": 0.0}))
    results = worker.score(samples)
    assert [r["score"] for r in results] == [1.0, 0.0, 0.5, 0.0]
    assert results[0]["math/mean"] == 1.0 and results[0]["math/correct"] == 1.0
    assert results[2]["general/mean"] == 0.5
    assert results[2]["general/ifeval/lowercase"] == 1.0
    assert results[2]["general/ifeval/no_commas"] == 0.0
    assert results[2]["correct"] == 0.0 and results[0]["correct"] == 1.0
    assert "math/mean" not in results[2] and "general/mean" not in results[0]
    assert "no reward route for tag 'poetry'" in results[3]["error"]
    assert all(r["error"] is None for r in results[:3])


def test_route_options_catch_all_and_inner_errors_named_by_domain():
    samples = [
        {"response": "12", "answer": "12", "tag": "a"},
        {"response": "hi", "answer": "not json", "tag": "b"},
    ]
    opts = {
        "routes": {"a": "math", "*": "ifeval"},
        "route_options": {"a": {"format_weight": 0.5}},
    }
    results = RewardWorker(RewardArgs("mix", options=opts)).score(samples)
    assert results[0]["score"] == 1.0 and results[0]["a/format"] == 1.0
    assert results[1]["error"].startswith(  # the domain, then the call the route made
        "b: ifeval_reward('hi', 'not json', tag='b') raised ValueError: 'answer' is not JSON"
    )


def _recipe(*overrides):
    return load_recipe("rlvr-mix", list(overrides))[0]


def test_the_mix_recipe_passes_routes_to_the_workers():
    cfg = _recipe()
    opts = cfg.reward.worker_options
    assert opts["routes"] == {"math": "math", "code": "code", "general": "ifeval"}
    assert opts["route_options"] == {"code": {"max_workers": 2}}
    assert set(cfg.data.mix) == {"math", "code", "general"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["reward.fn=math", "reward.routes={}", "reward.route_options={}"], "set reward.fn = mix"),
        (
            ["reward.routes={math: math, code: code}", "reward.route_options={}"],
            "data.mix.general has no reward",
        ),
        (["reward.route_options.poetry={x: 1}"], "route_options.poetry has no route"),
        (["data.mix.code.ratio=0"], "ratio"),
    ],
)
def test_mix_config_mistakes_fail_before_anything_starts(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _recipe(*overrides)

"""`roll eval` through the real CLI (typer's runner, in process, no Ray)."""

from __future__ import annotations

import json

import pytest
from error_text import error_message, flat
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.cli.eval_cmd import ENV_EPISODES
from rollcli.cli.eval_target import resolve_eval_target
from rollcli.evaluation.stats import (
    mcnemar_exact,
    mean_difference_interval,
    sign_flip_p,
    wilson_interval,
)

runner = CliRunner()


def _eval(*args: str) -> dict:
    result = runner.invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.stderr + str(result.exception)
    return json.loads(result.stdout)


def test_random_baseline_on_frozenlake() -> None:
    out = _eval("frozenlake", "--model", "random", "--n", "12", "--seed", "5")
    assert out["env"] == "frozenlake" and out["episodes"] == 12
    assert out["valid_action_rate"] == 1.0  # random legal moves always parse
    low, high = out["success_ci95"]
    assert 0.0 <= low <= out["success_rate"] <= high <= 1.0
    assert 1.0 <= out["mean_steps"] <= 10.0  # agentic-frozenlake: max_turns 10
    assert out == _eval("frozenlake", "--model", "random", "--n", "12", "--seed", "5")


def test_expert_baseline_walks_the_shortest_way_on_firm_ice() -> None:
    """`--model expert` plays the env's solver: on firm ice it reaches every goal, each in
    exactly the shortest safe walk's number of moves, and it is repeatable."""
    from rollcli.envs.frozenlake import goal_distances
    from rollcli.envs.registry import build_env
    from rollcli.rollout.agentic_setup import env_kwargs

    out = _eval("frozenlake", "--model", "expert", "--n", "10", "--seed", "7")
    assert out["success_rate"] == 1.0 and out["valid_action_rate"] == 1.0
    cfg, _ = resolve_eval_target("frozenlake", [])
    env = build_env("frozenlake", env_kwargs(cfg.agentic, validation=True))
    shortest = []
    for seed in range(7, 17):
        env.reset(seed=seed)
        start = "".join(env.desc).index("S")
        shortest.append(goal_distances(list(env.desc))[divmod(start, 4)])
    assert [row["steps"] for row in out["outcomes"]] == shortest
    assert out == _eval("frozenlake", "--model", "expert", "--n", "10", "--seed", "7")


def test_expert_baseline_needs_an_env_with_an_expert_and_an_env_recipe() -> None:
    result = runner.invoke(app, ["eval", "rlvr-math", "--model", "expert"])
    assert result.exit_code == 2
    assert "an rlvr recipe needs a model" in flat(result.stderr)
    result = runner.invoke(app, ["eval", "frozenlake", "--model", "expert", "--temperature", "1"])
    assert result.exit_code == 2 and "--temperature applies to a model" in flat(result.stderr)


def test_random_baseline_on_webshop_reports_reward() -> None:
    out = _eval("webshop", "--model", "random", "--n", "3", "agentic.env_kwargs.num_products=200")
    assert out["env"] == "webshop" and 0.0 <= out["mean_reward"] <= 1.0
    assert out["valid_action_rate"] == 1.0


def test_tiny_random_model_plays_and_renders_an_episode() -> None:
    result = runner.invoke(
        app, ["eval", "sokoban", "--model", "tiny-random", "--n", "2", "rollout.max_new_tokens=4"]
    )
    assert result.exit_code == 0, result.stderr + str(result.exception)
    assert "success rate" in result.stdout and "95% CI" in result.stdout
    assert "example episode" in result.stdout and "── reply 1" in result.stdout


def test_the_tool_env_reports_success_and_tool_use_on_held_out_tasks() -> None:
    # `roll eval tool` is the agentic-tool-math recipe's env; --seed picks validation tasks
    out = _eval("tool", "--model", "tiny-random", "--n", "2", "--seed", "3",
                "rollout.max_new_tokens=4")  # fmt: skip
    assert out["env"] == "tool" and out["episodes"] == 2
    assert [r["seed"] for r in out["outcomes"]] == [3, 4]
    assert {"success_rate", "success_ci95", "episodes"} <= set(out)
    assert out["mean_steps"] == 3.0  # agentic-tool-math: max_turns 3, no answer from noise
    assert out["tool_error_kinds"].keys() == {
        "malformed", "unknown_tool", "bad_arguments", "raised", "timeout"
    }  # fmt: skip
    assert 0.0 <= out["tool_call_valid"] <= 1.0 and out["tool_calls_per_episode"] >= 0.0
    recipe = resolve_eval_target("agentic-tool-math", [])[0]
    assert resolve_eval_target("tool", [])[0] == recipe


def test_an_agent_recipe_is_evaluated_with_its_agent_program() -> None:
    """`roll eval agentic-tool-math-agent`: the held-out tasks played by the recipe's agent
    program through the endpoint (the same summary keys); no random baseline for it."""
    pytest.importorskip("openai")
    out = _eval("tool-math-agent", "--model", "tiny-random", "--n", "2", "--seed", "3",
                "rollout.max_new_tokens=4")  # fmt: skip
    assert out["episodes"] == 2 and [r["seed"] for r in out["outcomes"]] == [3, 4]
    assert out["success_rate"] == 0.0 and out["mean_steps"] == 3.0  # the program's 3 replies
    assert all(r["error"] is None for r in out["outcomes"])
    assert out["mean_reward"] == pytest.approx(-0.3)  # three replies with no call or answer
    result = runner.invoke(app, ["eval", "tool-math-agent", "--model", "random", "--n", "2"])
    assert result.exit_code != 0 and "need a model to talk to" in flat(result.stderr)


def test_an_offline_recipe_is_refused() -> None:
    result = runner.invoke(app, ["eval", "dpo", "--model", "random"])
    assert result.exit_code == 2
    message = error_message(result.stderr)
    assert "give sokoban, frozenlake, webshop, tool, an agentic or an rlvr recipe" in message


def test_json_has_every_episode() -> None:
    out = _eval("frozenlake", "--model", "random", "--n", "20")
    rows = out["outcomes"]
    assert [r["seed"] for r in rows] == list(range(1_000_000, 1_000_020))  # agentic.val_seed
    assert all(set(r) == {"seed", "success", "steps", "return", "end", "error"} for r in rows)
    assert out["success_rate"] == sum(r["success"] for r in rows) / 20
    assert out["mean_steps"] == sum(r["steps"] for r in rows) / 20
    assert out["success_ci95"] == list(wilson_interval(sum(r["success"] for r in rows), 20))


def test_compare_pairs_two_models_on_the_same_seeds() -> None:
    out = _eval(
        "frozenlake", "--model", "random", "--compare", "tiny-random", "--n", "6",
        "--temperature", "1.0", "rollout.max_new_tokens=4",
    )  # fmt: skip
    first, second = (m["outcomes"] for m in out["models"])
    assert [r["seed"] for r in first] == [r["seed"] for r in second]
    assert out["models"][1]["temperature"] == 1.0
    b = sum(x["success"] and not y["success"] for x, y in zip(first, second, strict=True))
    c = sum(y["success"] and not x["success"] for x, y in zip(first, second, strict=True))
    paired = out["paired"]
    assert (paired["only_first"], paired["only_second"]) == (b, c)
    assert paired["p_value"] == mcnemar_exact(b, c)
    # the episode returns, paired: the mean difference and the sign-flip test on them
    diffs = [x["return"] - y["return"] for x, y in zip(first, second, strict=True)]
    assert paired["score_difference"] == pytest.approx(sum(diffs) / 6)
    assert paired["score_difference_ci95"] == pytest.approx(list(mean_difference_interval(diffs)))
    assert paired["score_p_value"] == pytest.approx(sign_flip_p(diffs))


def test_default_is_at_least_200_episodes_and_k_is_refused() -> None:
    assert ENV_EPISODES >= 200
    result = runner.invoke(app, ["eval", "frozenlake", "--model", "random", "--k", "4"])
    assert result.exit_code == 2 and "--k applies to rlvr recipes" in flat(result.stderr)


def test_an_unknown_run_or_model_is_a_clear_error(tmp_path) -> None:
    result = runner.invoke(
        app, ["eval", "frozenlake", "--model", "no-such-run", "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "no-such-run" in flat(result.stderr)

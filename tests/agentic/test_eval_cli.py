"""`roll eval` through the real CLI (typer's runner, in process, no Ray)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rollcli.cli.app import app

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
    assert 1.0 <= out["mean_steps"] <= 5.0  # agentic-frozenlake: max_turns 5
    assert out == _eval("frozenlake", "--model", "random", "--n", "12", "--seed", "5")


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


def test_a_non_agentic_recipe_is_refused() -> None:
    result = runner.invoke(app, ["eval", "rlvr-math", "--model", "random"])
    assert result.exit_code == 2
    assert "roll eval plays environments" in result.stderr


def test_an_unknown_run_or_model_is_a_clear_error(tmp_path) -> None:
    result = runner.invoke(
        app, ["eval", "frozenlake", "--model", "no-such-run", "--runs-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "no-such-run" in result.stderr

"""The paper's agentic experiments at their scale (issue 67): each recipe's dry run shows the
paper's settings, plans to fit 8 GPUs, and runs one step on CPU with tiny-random and small
overrides (slow); FrozenLake training with Sokoban validation runs on the embedded model and
`roll logs` shows both envs' success (slow)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from roll_subprocess import roll
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()
# recipe -> (what its dry run shows of the paper's scale, the alias that picks it on GPUs)
PAPER = {
    "sokoban-paper": (
        "agentic: 1024 sokoban episodes a step (128 groups x 8), up to 20 actions of 32 new "
        "tokens in 8192 tokens; validation: 256 sokoban episodes + 256 sokoban episodes "
        "(val/sokoban-large/*)",
        "sokoban",
    ),
    "sokoban-large-paper": ("agentic: 1024 sokoban episodes a step", None),
    "sokoban-vocab-paper": ("agentic: 1024 sokoban episodes a step", None),
    "frozenlake-paper": (
        "agentic: 1024 frozenlake episodes a step (128 groups x 8), up to 20 actions of 32 "
        "new tokens in 8192 tokens; validation: 256 frozenlake episodes + 256 sokoban "
        "episodes (val/sokoban/*)",
        "frozenlake",
    ),
    "webshop-paper": (
        "agentic: 64 webshop episodes a step (8 groups x 8), up to 50 actions of 128 new "
        "tokens in 8192 tokens; validation: 64 webshop episodes",
        "shop",
    ),
}
MODEL = {"webshop-paper": "qwen2.5-7b"}  # the others: qwen2.5-0.5b
WIDE = {"COLUMNS": "400"}


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("recipe", sorted(PAPER))
def test_the_dry_run_shows_the_papers_settings(recipe: str) -> None:
    shown, alias = PAPER[recipe]
    res = runner.invoke(app, ["train", alias or recipe, "--gpus", "8", "--dry-run"], env=WIDE)
    assert res.exit_code == 0, res.output
    assert shown in _flat(res.stderr)
    assert f"# recipe {recipe}, resolved" in res.stderr
    if alias:  # the CPU recipe's alias picks the paper's on GPUs, and says so
        assert f"note: recipe {recipe}: `{alias}` on 8 GPUs runs the paper's" in _flat(res.stderr)
    resolved = res.stdout
    assert f"model: {MODEL.get(recipe, 'qwen2.5-0.5b')}" in resolved
    assert "reward_clip: 20.0" in resolved and "advantage_clip: 10.0" in resolved
    assert "policy_loss: ppo" in resolved and "advantage: reinforce" in resolved
    assert "warmup: null" in resolved
    penalty = "-0.05" if recipe == "webshop-paper" else "-0.001"
    assert f"format_penalty: {penalty}" in resolved


@pytest.mark.parametrize("kind", ["h100-80g", "h200"])
@pytest.mark.parametrize("recipe", sorted(PAPER))
def test_the_plan_fits_8_gpus(recipe: str, kind: str) -> None:
    res = runner.invoke(app, ["plan", recipe, "--gpus", "8", "--gpu-kind", kind, "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["fits"] is True


def test_on_a_cpu_the_aliases_keep_the_cpu_recipes() -> None:
    for alias, cpu in (("sokoban", "agentic-sokoban"), ("frozenlake", "agentic-frozenlake")):
        res = runner.invoke(app, ["train", alias, "--dry-run"], env=WIDE)
        assert res.exit_code == 0, res.output
        assert f"# recipe {cpu}, resolved" in res.stderr and "model: smollm2-135m" in res.stdout


SMALL = [
    "agentic.group_size=2",
    "agentic.groups_per_step=2",
    "agentic.val_episodes=2",
    "agentic.max_turns=2",
    "rollout.max_new_tokens=4",
    "train.micro_batch_size=2",
]


def _metrics(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow  # ~1 min each: Ray, the model workers and three env roles
@pytest.mark.parametrize("recipe", sorted(PAPER))
def test_each_paper_recipe_trains_one_step_on_cpu(recipe: str, tmp_path, tiny_model) -> None:
    cross = [] if recipe == "webshop-paper" else ["agentic.val_env.episodes=2"]
    shop = ["agentic.env_kwargs.num_products=200"] if recipe == "webshop-paper" else []
    result = roll(
        "train", recipe, "--model", "tiny-random", "--steps", "1", "--runs-dir", str(tmp_path),
        "--run-id", "t", *SMALL, *cross, *shop, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = _metrics(tmp_path / "t")
    assert [m["step"] for m in metrics] == [0, 1]
    assert "actor/pg_loss" in metrics[1] and "val/accuracy" in metrics[-1]
    if cross:
        label = {"sokoban-paper": "sokoban-large", "frozenlake-paper": "sokoban"}
        name = label.get(recipe, "sokoban-simple")
        assert metrics[0][f"val/{name}/n"] == 2.0 and metrics[0]["val/n"] == 2.0


@pytest.mark.slow  # ~2-4 min: the embedded 135M model plays both envs
def test_frozenlake_training_validates_on_sokoban_and_logs_show_both(tmp_path) -> None:
    result = roll(
        "train", "agentic-frozenlake", "--steps", "1", "--runs-dir", str(tmp_path),
        "--run-id", "x", "warmup=null", *SMALL, "agentic.val_env.env=sokoban",
        "agentic.val_env.env_kwargs.dim_room=[6,6]", "agentic.val_env.episodes=2",
        cwd=tmp_path, timeout=1200,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = _metrics(tmp_path / "x")
    for m in (metrics[0], metrics[-1]):  # before and after training
        assert {"val/success_rate", "val/sokoban/success_rate"} <= m.keys()
    logs = runner.invoke(app, ["logs", "x", "--runs-dir", str(tmp_path)], env=WIDE)
    assert logs.exit_code == 0, logs.output
    text = _flat(logs.stdout)  # lines wrap at the terminal's width
    assert re.search(r"validation: success \d\.\d{3} .* on 2 frozenlake episodes", text)
    valid = metrics[0]["val/sokoban/valid_action_rate"]  # the event reads the second env's
    assert re.search(
        rf"validation: success \d\.\d{{3}} · valid {valid:.2f} .* on 2 sokoban ep", text
    )
    assert re.search(r"step 0/1 val acc \d\.\d{3} val sokoban \d\.\d{3}", text)

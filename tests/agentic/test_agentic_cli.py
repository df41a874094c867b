"""`roll train` of the agentic recipes on tiny-random: the real CLI, Ray, env workers and
model workers, 2 steps each (frozenlake in the default tier; its resume, webshop and sokoban
with -m slow)."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from roll_subprocess import roll
from same_run import assert_same_run
from typer.testing import CliRunner

from rollcli.cli.app import app

SMALL = [
    "agentic.group_size=2",
    "agentic.groups_per_step=2",
    "agentic.val_episodes=2",
    "agentic.max_turns=2",
    "agentic.num_env_workers=2",
    "rollout.max_new_tokens=4",
    "train.micro_batch_size=2",
    # tiny-random's episodes all score alike, so the recipes' keep_top_groups would skip every
    # update; keep every group (the filter's own path: test_an_update_is_skipped_...)
    "agentic.keep_top_groups=1.0",
]
STEP_KEYS = {
    "env/success_rate",
    "env/valid_action_rate",
    "env/effective_action_rate",
    "env/mean_steps",
    "env/format_penalty",
    "env/env_errors",
    "reward/mean",
    "actor/pg_loss",
    "actor/grad_norm",
    "time/rollout_s",
    "rollout/gen_batch_mean",
    "agentic/informative_groups",
    "agentic/kept_groups",
}


def _train(recipe: str, tmp_path: Path, *extra: str, fault: str = "") -> Path:
    result = roll(
        "train", recipe, "--model", "tiny-random", "--steps", "2", "--runs-dir", str(tmp_path),
        "--run-id", "t", *SMALL, *extra, cwd=tmp_path, timeout=900, fault=fault,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp_path / "t"


def _check_run(run: Path, env: str, max_turns: int = 2) -> None:
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert {"val/success_rate", "val/valid_action_rate", "val/accuracy"} <= metrics[0].keys()
    for m in metrics[1:]:
        assert m.keys() >= STEP_KEYS, STEP_KEYS - m.keys()
        assert 1.0 <= m["env/mean_steps"] <= max_turns
        assert m["env/env_errors"] == 0.0
        fractions = {k: v for k, v in m.items() if k.startswith("agentic/action_frac/")}
        assert fractions and sum(fractions.values()) == pytest.approx(1.0)
        assert 0.0 <= m["agentic/informative_groups"] <= 1.0 and m["agentic/kept_groups"] == 2
    assert "val/success_rate" in metrics[2]
    samples = [json.loads(x) for x in (run / "samples" / "step-2.jsonl").read_text().splitlines()]
    assert len(samples) == 4 and all(s["env"] == env for s in samples)
    assert samples[0]["messages"][0]["role"] == "system"
    assert samples[0]["messages"][2]["role"] == "assistant" and samples[0]["steps"]
    assert samples[0]["seed"] == samples[1]["seed"]  # a group shares its seed
    assert (run / "checkpoints" / "step-2" / "model.safetensors").exists()


WARMUP = [
    "warmup.episodes=6",
    "warmup.val_episodes=2",
    "warmup.steps=1",
    "warmup.batch_size=4",
    "agentic.env_kwargs.spaced_cells=true",
]


@pytest.fixture(scope="module")
def frozenlake_run(tmp_path_factory, tiny_model) -> Path:
    """The agentic pipeline's one real-CLI run: warm-up, gigpo, a checkpoint each step (the
    resume below starts from step-1's)."""
    runs = tmp_path_factory.mktemp("frozenlake")
    return _train("agentic-frozenlake", runs, "agentic.mode=gigpo", "--save-every", "1", *WARMUP)


def test_frozenlake_warms_up_and_trains_two_steps(frozenlake_run: Path, tiny_model) -> None:
    from rollcli.config.loader import load_recipe

    run = frozenlake_run
    _check_run(run, "frozenlake")
    # the warm-up: 6 expert episodes in the RL chat format, one sft step, RL from its checkpoint
    warm = run / "warmup"
    rows = [json.loads(x) for x in (warm / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and rows[0]["messages"][1]["content"].startswith("P _ _")
    assert [json.loads(x)["step"] for x in (warm / "metrics.jsonl").read_text().splitlines()] == [
        0,
        1,
    ]
    assert json.loads((warm / "status.json").read_text())["status"] == "finished"
    # the warm-up splits its rows by the RL recipe's token budget too
    warm_cfg, _ = load_recipe(str(warm / "recipe.yaml"), [], saved_run=True)
    assert warm_cfg.train.micro_batch_tokens == 4096 and warm_cfg.train.micro_batch_size == 4
    checkpoint = (warm / "checkpoints" / "step-1").resolve()
    events = (run / "events.log").read_text()
    assert f"warm-up done: RL starts from {checkpoint}" in events
    # a second call (a resume) reuses the finished warm-up: nothing is played or trained again
    from rich.console import Console

    from rollcli.cli.display import RichDisplay
    from rollcli.launch.launch import warm_up
    from rollcli.runs.run_dir import RunDir

    cfg, _ = load_recipe(str(run / "recipe.yaml"), [], saved_run=True)
    stamp = (warm / "episodes.jsonl").stat().st_mtime_ns
    assert warm_up(cfg, RunDir(run), RichDisplay(Console(file=io.StringIO()))) == str(checkpoint)
    assert (warm / "episodes.jsonl").stat().st_mtime_ns == stamp
    assert (run / "events.log").read_text().count("warm-up: sft for") == 1
    # the first action token's entropy (after the recipe's "<answer>"): a random model's is
    # high, and never above log(vocabulary)
    vocab = json.loads((Path(tiny_model) / "config.json").read_text())["vocab_size"]
    for m in [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][1:]:
        assert 0.5 * math.log(vocab) < m["agentic/first_action_entropy"] <= math.log(vocab)


# `roll logs`, `roll eval` and `roll resume` run in this process (the CLI app itself: a
# subprocess each would only add its start-up; the training run above is the real-CLI one)


def test_logs_show_the_agentic_columns(frozenlake_run: Path) -> None:
    logs = CliRunner().invoke(
        app, ["logs", "t", "--wide", "--runs-dir", str(frozenlake_run.parent)]
    )
    assert logs.exit_code == 0 and "informative " in logs.stdout and "action H " in logs.stdout


@pytest.mark.usefixtures("ray_session")
def test_eval_by_run_id_plays_the_newest_checkpoint(frozenlake_run: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["eval", "frozenlake", "--model", "t", "--runs-dir", str(frozenlake_run.parent), "--n",
         "2", "--json", "rollout.max_new_tokens=4"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["episodes"] == 2


@pytest.mark.slow  # ~13 s; a run's resume in the default tier: sft's (SIGKILL), async rlvr's
@pytest.mark.usefixtures("ray_session")
def test_a_resumed_copy_repeats_the_run(frozenlake_run: Path) -> None:
    """A copy of the finished agentic run cut back to its step-1 checkpoint and resumed (in
    this process, one Ray session) ends as the run did: the same episodes, the same metrics
    and weights up to float32 rounding (tests/same_run.py). The warm-up is reused, not
    replayed."""
    run, runner = frozenlake_run, CliRunner()
    cut = run.parent / "cut"
    shutil.copytree(run, cut)
    shutil.rmtree(cut / "checkpoints" / "step-2")
    (cut / "samples" / "step-2.jsonl").unlink()  # the resumed run must play it again
    result = runner.invoke(app, ["resume", "cut", "--runs-dir", str(run.parent)])
    assert result.exit_code == 0, result.output[-3000:]
    assert "resuming from checkpoint step-1" in (cut / "events.log").read_text()
    for step in (1, 2):
        episodes = (cut / "samples" / f"step-{step}.jsonl").read_text()
        assert episodes == (run / "samples" / f"step-{step}.jsonl").read_text()
    assert_same_run(cut, run, 2)


@pytest.mark.slow
def test_sokoban_trains_two_steps(tmp_path, tiny_model) -> None:
    _check_run(_train("agentic-sokoban", tmp_path, "warmup=null"), "sokoban")


@pytest.mark.slow  # ~40 s; the pipeline runs by default in the frozenlake test, webshop's env in tests/webshop
def test_webshop_trains_two_steps(tmp_path, tiny_model) -> None:
    run = _train("webshop", tmp_path, "agentic.env_kwargs.num_products=200", "warmup=null")
    _check_run(run, "webshop")


@pytest.mark.slow
def test_a_dead_model_worker_mid_episode_restarts_from_the_checkpoint(tmp_path, tiny_model) -> None:
    fault = "kill-worker@generate:2+0.3"
    run = _train("agentic-frozenlake", tmp_path, "--save-every", "1", "warmup=null", fault=fault)
    events = (run / "events.log").read_text()
    assert "a worker died during step 2" in events and "retrying from step 2" in events
    _check_run(run, "frozenlake")


@pytest.mark.slow  # ~1 min: one step with the recipe's keep_top_groups
def test_an_update_is_skipped_when_no_group_has_spread(tmp_path, tiny_model) -> None:
    small = [x for x in SMALL if not x.startswith("agentic.keep_top_groups")]
    result = roll(
        "train", "agentic-frozenlake", "--model", "tiny-random", "--steps", "1",
        "--runs-dir", str(tmp_path), "--run-id", "t", "warmup=null", *small, cwd=tmp_path,
        timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run = tmp_path / "t"
    step = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][1]
    samples = [json.loads(x) for x in (run / "samples" / "step-1.jsonl").read_text().splitlines()]
    returns = [s["return"] for s in samples]
    assert returns[0] == returns[1] and returns[2] == returns[3]  # every reply invalid
    assert step["agentic/informative_groups"] == 0.0 and step["agentic/kept_groups"] == 0.0
    assert not any(k.startswith("actor/") for k in step)  # no update
    assert not any(s["trained"] for s in samples)
    assert (
        "step 1: every group's episodes scored alike; no update" in (run / "events.log").read_text()
    )


@pytest.mark.slow  # ~1.5 min: four model workers (two actor_train ranks, critic, engine)
def test_two_data_parallel_ranks_and_a_critic_train_and_resume(tmp_path, tiny_model) -> None:
    """What the agentic pipeline gains from sharing rlvr's step: data-parallel actor_train
    ranks and a PPO-GAE critic on the episodes' model tokens, checkpointed and resumed."""
    extra = ("--save-every", "1", "warmup=null", "train.num_workers=2", "algorithm.name=ppo")
    run = _train("agentic-frozenlake", tmp_path, *extra)
    _check_run(run, "frozenlake")
    steps = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()][1:]
    for m in steps:
        assert math.isfinite(m["critic/vf_loss"]) and m["critic/grad_norm"] > 0
    import torch

    ckpt = run / "checkpoints" / "step-2"
    assert (ckpt / "critic.pt").is_file()
    assert len(torch.load(ckpt / "rng.pt", weights_only=False)["actor_train"]) == 2
    result = roll("resume", "t", "--runs-dir", str(tmp_path), "train.steps=3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (run / "checkpoints" / "step-3" / "model.safetensors").is_file()


@pytest.mark.slow  # ~1.5 min
def test_a_deepspeed_zero3_actor_trains_on_episodes(tmp_path, tiny_model) -> None:
    pytest.importorskip("deepspeed")
    extra = ("warmup=null", "train.strategy=deepspeed", "devices.actor_train.zero_stage=3")
    run = _train("agentic-frozenlake", tmp_path, *extra)
    _check_run(run, "frozenlake")
    assert (run / "checkpoints" / "step-2" / "deepspeed" / "state").is_dir()

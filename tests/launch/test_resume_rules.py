"""`roll resume RUN_ID key=value ...` refuses, before anything starts, an override of what
the run trains on (the data and its order, the seed, the model) or of its saved state's
layout; other changes go through and are said."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.config.errors import ConfigError
from rollcli.config.loader import dump_recipe, load_recipe
from rollcli.launch.resume_rules import check_resumable
from rollcli.runs.run_dir import RunDir


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("data.train_size=100", "data.train_size"),
        ("data.task_args.min_digits=3", "data.task_args.min_digits"),
        ("data.val_size=64", "data.val_size"),  # validation leaves training: it would change
        ("seed=7", "seed"),
        ("train.lora.r=8", "train.lora"),
        ("train.num_workers=2", "train.num_workers"),
    ],
)
def test_what_the_run_trains_on_cannot_change_on_resume(override, key) -> None:
    recorded, _ = load_recipe("rlvr-math")
    changed, _ = load_recipe("rlvr-math", [override])
    with pytest.raises(ConfigError, match=f"^{key}[.a-z_]* cannot change when a run resumes"):
        check_resumable(recorded, changed)


def test_other_changes_go_through() -> None:
    recorded, _ = load_recipe("rlvr-math")
    for override in (
        "train.steps=40",
        "train.lr=5e-6",
        "run.eval_every=5",
        "rollout.temperature=1",
    ):
        check_resumable(recorded, load_recipe("rlvr-math", [override])[0])
    kl = ["algorithm.kl_controller=adaptive", "algorithm.kl_in=reward"]
    adaptive, _ = load_recipe("rlvr-math", kl)
    with pytest.raises(ConfigError, match="adaptive KL controller's starting value"):
        check_resumable(adaptive, load_recipe("rlvr-math", [*kl, "algorithm.kl_coef=0.05"])[0])
    with pytest.raises(ConfigError, match="adds or removes the critic"):
        check_resumable(recorded, load_recipe("rlvr-math", ["algorithm.advantage=gae"])[0])


def test_roll_resume_refuses_before_anything_starts(tmp_path, monkeypatch) -> None:
    import rollcli.launch.launch as launch

    monkeypatch.setattr(launch, "_prepare_model", lambda *a: pytest.fail("the run started"))
    cfg, _ = load_recipe("rlvr-math")
    RunDir.create(tmp_path, "r1", dump_recipe(cfg))
    args = ["resume", "r1", "--runs-dir", str(tmp_path), "data.train_size=10"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "data.train_size cannot change when a run resumes (it was 2000, now 10)" in " ".join(
        result.stderr.split()
    )


def test_roll_resume_says_which_step_it_continues_from(tmp_path, monkeypatch) -> None:
    """`roll resume` said nothing on screen of where it went on (events.log did): its first
    line names the checkpoint and the next step."""
    import rollcli.launch.launch as launch
    from rollcli.runs.checkpoint import write_checkpoint

    def started(*args: object) -> str:
        raise ConfigError("the run starts here")

    monkeypatch.setattr(launch, "_prepare_model", started)
    cfg, _ = load_recipe("rlvr-math", ["train.steps=10"])
    run = RunDir.create(tmp_path, "r2", dump_recipe(cfg))
    for step in (2, 4):
        write_checkpoint(run.checkpoints, step, lambda folder: None, {"step": step}, keep_last=2)
    result = CliRunner().invoke(app, ["resume", "r2", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = [" ".join(line.split()) for line in result.stderr.splitlines()]
    assert lines[0] == "resuming run r2 from checkpoint step-4: step 5 of 10 next"

"""Dry run = train: `roll plan`, `roll train --dry-run` and `roll train` refuse what does
not depend on the machine with the same line, before Ray starts and before the run folder
exists; what depends on the machine is a note in a dry run (rollcli/launch/prelaunch.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()

# (recipe and arguments, the start of the line all three commands refuse with)
LATE_ONLY = [
    (["rlvr-math", "--model", "qwen-7b"], "cannot plan model 'qwen-7b': unknown model"),
    (
        ["rlvr-math", "data.source=file", "data.train_path=missing/train.jsonl"],
        "data.path: 'missing/train.jsonl' does not exist (a data file, folder or hub dataset",
    ),
    (
        ["webshop", "agentic.shaping=progress"],
        "agentic.shaping applies to environments that take it (frozenlake, sokoban); "
        "'webshop' does not",
    ),
    (
        ["rlvr-math", "reward.fn=nopkg.rewards:score"],
        "reward.fn = 'nopkg.rewards:score': cannot import 'nopkg.rewards'",
    ),
    (
        ["agentic-sokoban", "agentic.env_kwargs.bogus=1"],
        "agentic.env_kwargs.bogus: environment 'sokoban' takes no 'bogus'",
    ),
    # the plugins' names and options, which config (below envs and rewards) does not import
    (
        ["agentic-frozenlake", "agentic.env=frozenlak"],
        "agentic.env = 'frozenlak' is not a registered environment (did you mean 'frozenlake'?)",
    ),
    (
        ["rlvr-code", "reward.options.max_worker=2"],
        "unknown key 'reward.options.max_worker' (did you mean 'reward.options.max_workers'?)",
    ),
]


def _line(res) -> str:  # noqa: ANN001
    """The one error message (the data check's is wrapped at 80 columns, continued
    indented), as one line."""
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: "), res.stderr
    assert all(line.startswith("  ") and len(line) <= 80 for line in lines[1:]), res.stderr
    return " ".join(line.strip() for line in lines)


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """`roll train` that reaches Ray fails the test instead of starting it."""
    from rollcli.distributed import ray_session

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray_session, "start_ray", refuse)


ONE_DIGIT_SUMS = "{min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["rlvr-math", f"data.task_args={ONE_DIGIT_SUMS}", "data.val_size=300"], ""),
        (  # a generated domain of a mix, by its name (its share of data.val_size)
            [
                "rlvr-math",
                "data.source=mix",
                "data.task_args={}",
                f"data.mix.sums={{ratio: 1, task: chain_sum, task_args: {ONE_DIGIT_SUMS}}}",
                "data.val_size=300",
                "reward.fn=mix",
                "reward.routes={sums: math}",
            ],
            "data.mix.sums: ",
        ),
    ],
)
def test_a_validation_size_a_generator_cannot_give_is_refused_before_anything_starts(
    no_ray: None, tmp_path: Path, args: list[str], named: str
) -> None:
    """data.val_size=100000 on rlvr-math's two-digit sums (~16,000 distinct problems) passed
    the dry run and was refused only once the workers drew it; now the dry run and train
    draw the generator's validation problems before anything starts, as a dataset's size is
    refused when it is read. (One-digit sums here: a few hundred, drawn in a moment.)"""
    runs = ["--runs-dir", str(tmp_path / "runs")]
    dry = runner.invoke(app, ["train", *args, "--dry-run", *runs])
    train = runner.invoke(app, ["train", *args, *runs])
    assert (dry.exit_code, train.exit_code) == (2, 2), dry.output
    assert _line(dry).startswith(
        f"error: {named}data.task = 'chain_sum' with these data.task_args has only "
    )
    assert _line(dry).endswith("lower data.val_size or widen the task")
    assert _line(dry) == _line(train)
    assert not (tmp_path / "runs").exists()  # no run folder: nothing started


@pytest.mark.parametrize(("args", "expected"), LATE_ONLY)
def test_plan_dry_run_and_train_refuse_with_the_same_line_before_anything_starts(
    no_ray: None, tmp_path: Path, args: list[str], expected: str
) -> None:
    runs = ["--runs-dir", str(tmp_path / "runs")]
    plan = runner.invoke(app, ["plan", *args])
    dry = runner.invoke(app, ["train", *args, "--dry-run", *runs])
    train = runner.invoke(app, ["train", *args, *runs])
    assert (plan.exit_code, dry.exit_code, train.exit_code) == (2, 2, 2), train.output
    assert _line(plan).startswith(f"error: {expected}")
    assert _line(plan) == _line(dry) == _line(train)
    assert not (tmp_path / "runs").exists()  # no run folder: nothing started


def test_dry_run_notes_what_only_the_training_machine_can_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rollcli.launch import gpu_support

    monkeypatch.setattr(gpu_support, "visible_gpu_count", lambda env=None: 0)  # a laptop
    args = ["train", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8", "--dry-run"]
    args += ["train.strategy=deepspeed", "devices.actor_train.zero_stage=3"]  # fits 8 H100s
    args += ["rollout.engine=hf"]  # with the hf engine
    res = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "model: qwen2.5-7b" in res.stdout  # the resolved recipe
    notes = _notes(res.stderr)
    assert any(
        n.startswith("note: --gpus 8: no CUDA GPU is visible on this machine") for n in notes
    )
    machine = [n for n in notes if n.endswith("`roll train` checks this at launch)")]
    assert len(machine) == 1  # the GPUs; the model is not refused, but downloaded:
    flat = " ".join(res.stderr.split())  # the download note is wrapped at 80 columns
    assert (
        "note: model qwen2.5-7b is not in the Hugging Face cache" in flat
        and "`roll train` downloads it there first" in flat
    )
    assert "error" not in res.stderr


def _notes(stderr: str) -> list[str]:
    """The notes on `stderr`, each wrapped to 80 columns (even on a wider terminal) with
    its continuation lines indented, as one line."""
    notes: list[str] = []
    for line in stderr.splitlines():
        assert len(line) <= 80, line
        if line.startswith("note: "):
            notes.append(line)
        elif notes and line.startswith("  "):
            notes[-1] += " " + line.strip()
    return notes


def test_dry_run_refuses_a_plan_that_does_not_fit_as_train_does() -> None:
    args = ["train", "rlvr-math", "--model", "qwen2.5-72b", "--gpus", "1", "--dry-run"]
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert _line(res).startswith("error: the plan for qwen2.5-72b on 1 GPU(s) does not fit")

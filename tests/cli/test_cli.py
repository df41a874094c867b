"""The CLI through typer's CliRunner (and a subprocess for import costs)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app

runner = CliRunner()


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("train", "resume", "recipes", "runs", "logs", "export", "plot"):
        assert command in result.stdout


def test_help_recipes_plan_and_dry_run_import_no_torch_ray_or_trackers() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from rollcli.cli.app import app\n"
        "r = CliRunner()\n"
        "assert r.invoke(app, ['--help']).exit_code == 0\n"
        "assert r.invoke(app, ['recipes', 'ls']).exit_code == 0\n"
        "assert r.invoke(app, ['train', 'rlvr', '--dry-run']).exit_code == 0\n"
        "assert r.invoke(app, ['plan', 'rlvr-math', '--gpus', '8']).exit_code == 0\n"
        "heavy = ('torch', 'ray', 'transformers', 'wandb', 'swanlab')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_recipes_ls_show_cp(tmp_path) -> None:
    listed = runner.invoke(app, ["recipes", "ls"])
    assert listed.exit_code == 0 and "rlvr-math" in listed.stdout and "webshop" in listed.stdout
    shown = runner.invoke(app, ["recipes", "show", "rlvr-math"])
    assert yaml.safe_load(shown.stdout)["name"] == "rlvr-math"
    dest = tmp_path / "mine.yaml"
    copied = runner.invoke(app, ["recipes", "cp", "rlvr", str(dest)])
    assert copied.exit_code == 0 and yaml.safe_load(dest.read_text())["pipeline"] == "rlvr"
    again = runner.invoke(app, ["recipes", "cp", "rlvr", str(dest)])
    assert again.exit_code == 2 and "already exists" in error_message(again.stderr)


def test_recipes_ls_shows_the_aliases_the_docs_use() -> None:
    from rollcli.config.catalogue import catalogue, find_recipe

    listed = runner.invoke(app, ["recipes", "ls"], env={"COLUMNS": "80"})
    lines = listed.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    name_cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    for entry in catalogue():
        if entry.aliases:
            also = f"also: {', '.join(entry.aliases)}"
            assert name_cells[name_cells.index(entry.name) + 1] == also
            for alias in entry.aliases:  # each one `roll train ALIAS` resolves
                assert find_recipe(alias)[0] == entry.name
    assert "also: rlvr, math" in name_cells


def test_train_dry_run_prints_the_resolved_recipe_with_flags_applied() -> None:
    result = runner.invoke(
        app,
        ["train", "rlvr", "--dry-run", "--steps", "3", "--model", "tiny-random", "train.lr=2e-6"],
    )
    assert result.exit_code == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    assert resolved["train"]["steps"] == 3
    assert resolved["model"] == "tiny-random"
    assert resolved["train"]["lr"] == 2e-6
    assert resolved["algorithm"]["advantage"] == "grpo"


def test_config_error_is_one_red_line_with_exit_2() -> None:
    result = runner.invoke(app, ["train", "rlvr", "train.lrr=1"])
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == ["error: rlvr-math: unknown key 'train.lrr' (did you mean 'train.lr'?)"]
    assert "Traceback" not in result.stderr


def test_agentic_recipe_resolves_without_training() -> None:
    # every recipe pipeline is built now (agentic last); a dry run only resolves the recipe
    result = runner.invoke(app, ["train", "agentic-sokoban", "--steps", "1", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "pipeline: agentic" in result.stdout and "env: sokoban" in result.stdout


def test_runs_ls_on_an_empty_folder(tmp_path) -> None:
    result = runner.invoke(app, ["runs", "ls", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0 and "run id" in result.stdout


def test_tis_with_topr_is_refused_not_ignored() -> None:
    args = ["train", "rlvr", "algorithm.off_policy.correction=tis", "algorithm.policy_loss=topr"]
    result = runner.invoke(app, [*args, "--steps", "1", "--dry-run"])
    assert result.exit_code == 2
    assert "off_policy.correction tis cannot apply to policy_loss topr" in error_message(
        result.stderr
    )


@pytest.mark.parametrize("correction", ["tis", "mis", "icepop"])
def test_pg_takes_every_correction_against_the_sampler(correction) -> None:
    args = ["train", "rlvr", f"algorithm.off_policy.correction={correction}"]
    result = runner.invoke(app, [*args, "algorithm.policy_loss=pg", "--steps", "1", "--dry-run"])
    assert result.exit_code == 0, result.stderr


def test_the_old_tis_cap_is_refused_with_its_new_spelling() -> None:
    result = runner.invoke(app, ["train", "rlvr", "algorithm.tis_cap=1.5", "--steps", "1"])
    assert result.exit_code == 2
    message = error_message(result.stderr)
    assert "algorithm.off_policy.correction=tis algorithm.off_policy.cap=1.5" in message


def test_the_vllm_engine_without_vllm_says_how_to_install_it() -> None:
    from rollcli.config.engines import vllm_available

    if vllm_available():
        pytest.skip("vllm is installed here")
    result = runner.invoke(app, ["train", "rlvr", "rollout.engine=vllm", "--steps", "1"])
    assert result.exit_code == 2 and "make vllm" in result.stderr


def test_runs_ls_reports_a_run_whose_process_died_as_killed(tmp_path) -> None:
    from rollcli.runs.run_dir import RunDir

    run = RunDir.create(tmp_path, "gone", "name: x\n")
    run.write_status("running", recipe="x", model="m", total_steps=3, step=1)
    status = json.loads((tmp_path / "gone" / "status.json").read_text())
    status["pid"] = 2**22 + 12345  # beyond pid_max: no such process
    (tmp_path / "gone" / "status.json").write_text(json.dumps(status))
    result = runner.invoke(app, ["runs", "ls", "--runs-dir", str(tmp_path)], env={"COLUMNS": "200"})
    row = next(line for line in result.stdout.splitlines() if "gone" in line)
    assert "killed" in row and "1/3" in row


def test_resume_auto_without_a_run_id_says_what_it_needs() -> None:
    result = runner.invoke(app, ["train", "rlvr", "--resume", "auto"])
    assert result.exit_code == 2
    assert "--run-id" in result.stderr


def test_resume_of_an_unknown_run_names_close_ones(tmp_path) -> None:
    (tmp_path / "rlvr-math-1").mkdir()
    (tmp_path / "rlvr-math-1" / "recipe.yaml").write_text("name: rlvr-math\n")
    result = runner.invoke(app, ["resume", "rlvr-math-2", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "did you mean 'rlvr-math-1'" in error_message(result.stderr)


def test_runs_ls_keeps_run_ids_whole_in_80_columns(tmp_path) -> None:
    from rollcli.runs.run_dir import RunDir

    ids = ["agentic-frozenlake-20261123-094501", "rlvr-math-20261123-094502"]
    for run_id in ids:
        run = RunDir.create(tmp_path, run_id, "name: x\n")
        run.write_status(
            "finished", recipe=run_id[:-16], model="qwen2.5-0.5b-instruct", total_steps=20, step=20
        )
    result = runner.invoke(app, ["runs", "ls", "--runs-dir", str(tmp_path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    for run_id in ids:  # whole, on one line, as `roll logs ID` needs it
        assert any(run_id in line for line in result.stdout.splitlines()), result.stdout


def test_runs_ls_shows_model_names_unfolded_in_80_columns(tmp_path) -> None:
    """The model column folded `smollm2-135m` into `smoll`/`m2-13`/`5m`: now the start and
    took columns give way, a name fits on its line and a long one ends in "…"."""
    from rollcli.runs.run_dir import RunDir

    models = {
        "rlvr-math-20261127-091830": "smollm2-135m",
        "sft-20261127-101112": "/work/runs/rlvr-math-20261127-091830/checkpoints/step-30",
    }
    for run_id, model in models.items():
        run = RunDir.create(tmp_path, run_id, "name: x\n")
        run.write_status("finished", recipe=run_id[:-16], model=model, total_steps=30, step=30)
        run.log_metrics({"step": 30, "reward/mean": 0.5, "val/accuracy": 0.25})
    result = runner.invoke(app, ["runs", "ls", "--runs-dir", str(tmp_path)], env={"COLUMNS": "80"})
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert len(lines) == 5  # title, header, rule, one line per run
    assert "smollm2-135m" in lines[3] and "30/30" in lines[3] and "0.250" in lines[3]
    assert "step-30 of rlv…" in lines[4]  # a checkpoint's step, its run id cut to fit
    assert lines[1].split() == ["run", "id", "model", "status", "step", "reward", "val", "took"]


def test_runs_ls_shows_the_model_as_given(tmp_path) -> None:
    """A hub id or a relative folder (`--model me/tiny`) was shown by its last part, `tiny`:
    another model of the same name read the same."""
    from rollcli.runs.run_dir import RunDir

    for run_id, model in {"sft-1": "me/tiny", "sft-2": "Qwen/Qwen2.5-0.5B@main"}.items():
        run = RunDir.create(tmp_path, run_id, "name: x\n")
        run.write_status("finished", recipe="sft", model=model, total_steps=3, step=3)
    result = runner.invoke(app, ["runs", "ls", "--runs-dir", str(tmp_path)], env={"COLUMNS": "80"})
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[3:]}
    assert rows == {"sft-1": "me/tiny", "sft-2": "Qwen/Qwen2.5-0.5B@main"}

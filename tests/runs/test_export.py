"""`roll export`: a Hugging Face folder of a real checkpoint of tiny-random, loaded back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from error_text import error_message
from transformers import AutoModelForCausalLM, AutoTokenizer
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs.best import mark_best
from rollcli.runs.checkpoint import write_checkpoint
from rollcli.runs.run_dir import RunDir
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer

runner = CliRunner()
ROLL_FILES = {"actor_optim.pt", "critic.pt", "trainer_state.json", "COMPLETE", "rng_state.pt"}


def _save_checkpoint(run: RunDir, step: int, model, tokenizer) -> Path:  # noqa: ANN001
    """What a run writes at `step`: the policy (weights moved by `step`) and roll's state."""
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.01)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

    def fill(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        torch.save(
            {"optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()},
            folder / "actor_optim.pt",
        )
        torch.save({"model": {"v_head": torch.zeros(3)}}, folder / "critic.pt")
        torch.save({"python": 1}, folder / "rng_state.pt")

    return write_checkpoint(run.checkpoints, step, fill, {"step": step}, keep_last=10)


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model) -> RunDir:
    """run-e with complete checkpoints at steps 2 and 4, and a half-written step 6."""
    run = RunDir.create(tmp_path_factory.mktemp("runs"), "run-e", "name: rlvr-math\n")
    model, tokenizer = load_causal_lm(tiny_model), load_tokenizer(tiny_model)
    _save_checkpoint(run, 2, model, tokenizer)
    step4 = _save_checkpoint(run, 4, model, tokenizer)
    half = run.checkpoints / ".tmp-step-6"  # killed while writing: never exported
    shutil.copytree(step4, half)
    (half / "COMPLETE").unlink()
    return run


def _export(run: RunDir, out: Path, *args: str):  # noqa: ANN202
    return runner.invoke(
        app, ["export", "run-e", str(out), "--runs-dir", str(run.root.parent), *args]
    )


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return AutoModelForCausalLM.from_pretrained(str(path)).state_dict()


def test_export_writes_the_newest_complete_checkpoint_as_a_loadable_hf_folder(
    run: RunDir, tmp_path: Path
) -> None:
    out = tmp_path / "policy"
    result = _export(run, out)
    assert result.exit_code == 0, result.stderr
    assert "exported step 4 of run run-e" in result.stderr

    step4 = run.checkpoints / "step-4"
    copied = {p.name for p in out.iterdir()}
    assert copied == {p.name for p in step4.iterdir()} - ROLL_FILES
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
    } <= copied
    # each file by its name (the folder is the first line on stderr): with the folder on
    # every line the list reached 154 columns
    printed = [line.split("\t")[0] for line in result.stdout.splitlines()]
    assert printed == sorted(copied)
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]  # no temporary folder left

    exported, source = _weights(out), _weights(step4)
    assert exported.keys() == source.keys()
    assert all(torch.equal(exported[k], source[k]) for k in source)
    step2 = _weights(run.checkpoints / "step-2")
    assert not torch.equal(
        exported["model.embed_tokens.weight"], step2["model.embed_tokens.weight"]
    )

    tokenizer, original = AutoTokenizer.from_pretrained(str(out)), load_tokenizer(step4)
    assert tokenizer("What is 2+3?")["input_ids"] == original("What is 2+3?")["input_ids"]


def test_every_line_fits_80_columns_whatever_the_folder(run: RunDir, tmp_path: Path) -> None:
    out = tmp_path / "policy"  # ~65 characters: with a file name, past 80
    assert len(str(out / "tokenizer_config.json\t297 B")) > 80
    result = runner.invoke(
        app,
        ["export", "run-e", str(out), "--runs-dir", str(run.root.parent)],
        env={"COLUMNS": "80"},
    )
    assert result.exit_code == 0, result.stderr
    lines = [*result.stdout.splitlines(), *result.stderr.splitlines()]
    assert max(len(line) for line in lines) <= 80, lines  # characters, not bytes
    flat = " ".join(result.stderr.split())
    assert f"exported step 4 of run run-e to {out}:" in flat
    # the call breaks after its parenthesis, where Python allows it when pasted
    assert f"load with AutoModelForCausalLM.from_pretrained( '{out}')" in flat


def test_step_picks_that_checkpoint(run: RunDir, tmp_path: Path) -> None:
    result = _export(run, tmp_path / "step2", "--step", "2")
    assert result.exit_code == 0, result.stderr
    assert "exported step 2" in result.stderr
    exported = (tmp_path / "step2" / "model.safetensors").read_bytes()
    assert exported == (run.checkpoints / "step-2" / "model.safetensors").read_bytes()


def test_unknown_or_half_written_step_lists_the_available_steps(
    run: RunDir, tmp_path: Path
) -> None:
    for step in ("3", "6"):
        result = _export(run, tmp_path / "out", "--step", step)
        assert result.exit_code == 2
        assert result.stderr.strip() == (
            f"error: no complete checkpoint of step {step} (available steps: 2, 4)"
        )
    assert not (tmp_path / "out").exists()


def test_a_non_empty_out_dir_is_kept_unless_force(run: RunDir, tmp_path: Path) -> None:
    out = tmp_path / "busy"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused = _export(run, out)
    assert refused.exit_code == 2
    message = error_message(refused.stderr)
    assert "busy exists and is not empty" in message and "--force" in message
    assert [p.name for p in out.iterdir()] == ["notes.txt"]

    forced = _export(run, out, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert not (out / "notes.txt").exists() and (out / "model.safetensors").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["busy"]

    empty = tmp_path / "empty"
    empty.mkdir()
    assert _export(run, empty).exit_code == 0  # an empty folder is fine without --force


def test_export_never_writes_over_the_run(run: RunDir) -> None:
    for out in (run.root, run.checkpoints / "exported"):
        result = _export(run, out, "--force")
        assert result.exit_code == 2
        assert "pick an OUT_DIR outside" in result.stderr
    assert (run.checkpoints / "step-4" / "actor_optim.pt").exists()


def test_unknown_run_and_run_without_checkpoints(run: RunDir, tmp_path: Path) -> None:
    runs_dir = run.root.parent
    unknown = runner.invoke(
        app, ["export", "run-x", str(tmp_path / "o"), "--runs-dir", str(runs_dir)]
    )
    assert unknown.exit_code == 2 and "no run 'run-x'" in unknown.stderr

    RunDir.create(runs_dir, "run-empty", "name: x\n")
    empty = runner.invoke(
        app, ["export", "run-empty", str(tmp_path / "o"), "--runs-dir", str(runs_dir)]
    )
    assert empty.exit_code == 2
    assert "no complete checkpoint in" in empty.stderr


def test_adapter_export_of_a_run_without_lora_is_one_clear_error(
    run: RunDir, tmp_path: Path
) -> None:
    result = _export(run, tmp_path / "adapter", "--adapter")
    assert result.exit_code == 2
    message = error_message(result.stderr)
    assert "holds no LoRA adapter" in message and "export without --adapter" in message
    assert not (tmp_path / "adapter").exists()


def test_best_exports_the_marked_checkpoint_and_errors_name_the_fix(
    run: RunDir, tmp_path: Path
) -> None:
    unmarked = _export(run, tmp_path / "none", "--best")
    assert unmarked.exit_code == 2 and "no best checkpoint is marked" in unmarked.stderr
    mark_best(run.checkpoints, 2, "val/accuracy", 0.25, 0.25)
    try:
        result = _export(run, tmp_path / "best", "--best")
        assert result.exit_code == 0, result.stderr
        assert "exported step 2" in result.stderr
        exported = (tmp_path / "best" / "model.safetensors").read_bytes()
        assert exported == (run.checkpoints / "step-2" / "model.safetensors").read_bytes()
        both = _export(run, tmp_path / "both", "--best", "--step", "4")
        assert both.exit_code == 2 and "--best and --step" in both.stderr
    finally:
        (run.checkpoints / "best.json").unlink()

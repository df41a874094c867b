"""Checkpoints and the disk, on real checkpoints of tiny-random written by `write_checkpoint`:
`run.keep_optimizer: last` drops the older ones' optimizer states and leaves them exportable;
free space below a checkpoint's size stops the write before it starts (the boundary is
`shutil.disk_usage`, monkeypatched: a disk cannot be filled for real here), and a write that
runs out of space anyway leaves no partial folder."""

from __future__ import annotations

import doctest
import errno
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs import disk_space, retention
from rollcli.runs.checkpoint import (
    DiskFullError,
    complete_checkpoints,
    latest_checkpoint,
    write_checkpoint,
)
from rollcli.runs.disk_space import check_room, folder_bytes, low_space_warning
from rollcli.runs.optimizer_states import (
    DROPPED_MARKER,
    drop_all_but_newest,
    drop_optimizer_states,
    resumable,
)
from rollcli.runs.run_dir import RunDir
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer

Usage = namedtuple("Usage", "total used free")


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model):  # noqa: ANN001, ANN201
    return load_causal_lm(tiny_model), load_tokenizer(tiny_model)


def _fill(model_and_tokenizer, critic: bool = False):  # noqa: ANN001, ANN202
    """What a run writes: the policy, AdamW's state after one step, and (ppo) the critic;
    fsdp2's partitions as a folder of their own."""
    model, tokenizer = model_and_tokenizer
    model.requires_grad_(True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model(torch.tensor([[1, 2, 3]])).logits.sum().backward()
    optimizer.step()
    optimizer.zero_grad()

    def fill(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tokenizer.save_pretrained(folder)
        torch.save({"optimizer": optimizer.state_dict()}, folder / "actor_optim.pt")
        torch.save({"rng": torch.get_rng_state()}, folder / "rng.pt")
        if critic:
            torch.save({"model": {"v_head": torch.zeros(64)}}, folder / "critic.pt")
            (folder / "fsdp2").mkdir()
            (folder / "fsdp2" / "__0_0.distcp").write_bytes(b"s" * 4096)

    return fill


def test_keep_optimizer_last_drops_the_older_states_and_they_still_export(
    tmp_path, model_and_tokenizer
) -> None:
    run = RunDir.create(tmp_path / "runs", "r", "name: sft\n")
    fill = _fill(model_and_tokenizer, critic=True)
    sizes = {}
    for step in (1, 2, 3):
        path = write_checkpoint(run.checkpoints, step, fill, {"step": step}, keep_last=5)
        sizes[step] = folder_bytes(path)
        # what the run's Checkpointer does with `run.keep_optimizer: last` after each write
        drop_all_but_newest(complete_checkpoints(run.checkpoints))
    steps = dict(complete_checkpoints(run.checkpoints))
    assert list(steps) == [1, 2, 3]
    newest = steps[3]
    assert resumable(newest)
    assert {"actor_optim.pt", "critic.pt", "fsdp2"} <= {p.name for p in newest.iterdir()}
    optimizer = (newest / "actor_optim.pt").stat().st_size
    resume_only = optimizer + (newest / "critic.pt").stat().st_size + 4096
    for step in (1, 2):
        old = steps[step]
        assert not resumable(old)
        names = {p.name for p in old.iterdir()}
        assert not names & {"actor_optim.pt", "critic.pt", "fsdp2"}
        assert {"model.safetensors", "config.json", "rng.pt", "trainer_state.json"} <= names
        marker_bytes = (old / DROPPED_MARKER).stat().st_size
        assert folder_bytes(old) == sizes[3] - resume_only + marker_bytes
    # AdamW's two moments are twice the fp32 weights
    weights = (newest / "model.safetensors").stat().st_size
    assert optimizer > 1.9 * weights

    # a dropped checkpoint exports and loads as a Hugging Face folder, weights unchanged
    out = tmp_path / "exported"
    result = CliRunner().invoke(
        app, ["export", "r", str(out), "--step", "1", "--runs-dir", str(tmp_path / "runs")]
    )
    assert result.exit_code == 0, result.stderr
    exported = load_causal_lm(out).state_dict()
    source = load_causal_lm(steps[1]).state_dict()
    assert all(torch.equal(exported[k], source[k]) for k in source)


def test_keep_optimizer_all_keeps_every_state_and_dropping_twice_frees_nothing(
    tmp_path, model_and_tokenizer
) -> None:
    ckpts = tmp_path / "checkpoints"
    fill = _fill(model_and_tokenizer)
    for step in (1, 2):
        write_checkpoint(ckpts, step, fill, {"step": step}, keep_last=5)
    assert all(
        resumable(p) and (p / "actor_optim.pt").exists() for _, p in complete_checkpoints(ckpts)
    )
    first = ckpts / "step-1"
    optimizer = (first / "actor_optim.pt").stat().st_size
    assert drop_optimizer_states(first) == optimizer
    assert drop_optimizer_states(first) == 0


def test_free_space_below_the_last_checkpoint_stops_the_write_before_it_starts(
    tmp_path, monkeypatch, model_and_tokenizer
) -> None:
    ckpts = tmp_path / "checkpoints"
    fill = _fill(model_and_tokenizer)
    write_checkpoint(ckpts, 1, fill, {"step": 1}, keep_last=5)
    size = folder_bytes(ckpts / "step-1")
    check_room(ckpts, 2)  # this machine's disk has room for one more

    free = {"bytes": size}
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(10 * size, 0, free["bytes"]))
    check_room(ckpts, 2)  # exactly one checkpoint's worth: it fits
    assert low_space_warning(ckpts, ckpts / "step-1") is None

    free["bytes"] = size - 1
    warning = low_space_warning(ckpts, ckpts / "step-1")
    assert warning is not None and warning.startswith("warning: disk nearly full: ")
    with pytest.raises(DiskFullError) as err:
        check_room(ckpts, 2)
    message = str(err.value)
    assert "\n" not in message
    assert f"no room for checkpoint step-2: {disk_space.gb(size - 1)} free on {ckpts}'s" in message
    assert "nothing was written" in message and "roll runs gc" in message
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-1"]


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        # a worker's error as Ray hands it to the driver: the message survives, the errno not
        RuntimeError(
            "ray::TrainedModelWorker.save_pretrained() ... [Errno 28] No space left on device"
        ),
    ],
)
def test_a_write_that_runs_out_of_disk_leaves_no_partial_folder(tmp_path, error) -> None:
    ckpts = tmp_path / "checkpoints"
    write_checkpoint(ckpts, 1, lambda f: (f / "model.safetensors").write_bytes(b"w" * 100), {}, 5)

    def fill(folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(b"w" * 50)  # half of it, then the disk is full
        raise error

    with pytest.raises(DiskFullError, match="filled up while checkpoint step-2 was written in "):
        write_checkpoint(ckpts, 2, fill, {}, keep_last=5)
    assert sorted(p.name for p in ckpts.iterdir()) == ["step-1"]
    assert latest_checkpoint(ckpts).name == "step-1"


def test_another_error_while_writing_is_not_taken_for_a_full_disk(tmp_path) -> None:
    def fill(folder: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError):
        write_checkpoint(tmp_path, 1, fill, {}, keep_last=5)


@pytest.mark.parametrize("module", [disk_space, retention])
def test_doctests(module) -> None:  # noqa: ANN001
    failures, tried = doctest.testmod(module)[:2]
    assert tried > 0 and failures == 0

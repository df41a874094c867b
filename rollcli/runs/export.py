"""Export the policy of a run's checkpoint as a plain Hugging Face folder, or (a LoRA run,
`adapter=True`) its adapter as a peft folder.

Only the files `transformers` reads are copied (config, generation config, weights, tokenizer;
a LoRA run's weights are already merged: `W + (alpha / r) B A`);
roll's own state (`actor_optim.pt`, `critic.pt`, `trainer_state.json`, `COMPLETE`, RNG files)
stays behind. The folder is built next to the destination and renamed into place, so a
destination never holds half an export.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

from rollcli.runs.best import read_best
from rollcli.runs.checkpoint import complete_checkpoints, fsync_path

# The files of a Hugging Face causal-LM folder: model, configs and every tokenizer format.
MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*-of-*.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "pytorch_model-*-of-*.bin",
)
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
    "chat_template.jinja",
    "chat_template.json",
)
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
ADAPTER_DIR = "adapter"  # a LoRA run's checkpoint: peft's adapter folder (strategies/lora.py)
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


class ExportError(Exception):
    """A user error: the message says what is wrong, `hint` what to do."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


def pick_checkpoint(
    checkpoints: Path, step: int | None = None, best: bool = False
) -> tuple[int, Path]:
    """The newest complete checkpoint, the one of `step`, or with `best` the best validation
    one (`runs/best.py`); half-written ones never count."""
    if best:
        marked = read_best(checkpoints)
        if marked is None:
            raise ExportError(
                f"no best checkpoint is marked in {checkpoints}",
                "a run marks one at each validation after step 0 that beats step 0 and every "
                "earlier one; none did, or the run predates best checkpoints: export --step N",
            )
        step = int(marked["step"])
    found = complete_checkpoints(checkpoints)
    if not found:
        raise ExportError(
            f"no complete checkpoint in {checkpoints}",
            "checkpoints are written every run.save_every steps and at the end of a run",
        )
    if step is None:
        return found[-1]
    for number, path in found:
        if number == step:
            return number, path
    steps = ", ".join(str(n) for n, _ in found)
    raise ExportError(f"no complete checkpoint of step {step}", f"available steps: {steps}")


def hf_files(checkpoint: Path) -> list[Path]:
    """The Hugging Face files of a checkpoint folder, sorted by name."""
    patterns = MODEL_FILES + TOKENIZER_FILES
    files = sorted(
        p
        for p in checkpoint.iterdir()
        if p.is_file() and any(fnmatch.fnmatchcase(p.name, pat) for pat in patterns)
    )
    names = {p.name for p in files}
    if "config.json" not in names or not names & set(WEIGHTS):
        raise ExportError(
            f"{checkpoint} holds no Hugging Face model (config.json and model weights)",
            "was it written by an older roll? its files: "
            + ", ".join(sorted(p.name for p in checkpoint.iterdir())),
        )
    return files


def adapter_files(checkpoint: Path) -> list[Path]:
    """A LoRA checkpoint's adapter files and the tokenizer's, sorted by name."""
    folder = checkpoint / ADAPTER_DIR
    missing = [n for n in ADAPTER_FILES if not (folder / n).is_file()]
    if missing:
        raise ExportError(
            f"{checkpoint} holds no LoRA adapter ({folder / missing[0]} is missing)",
            "the run trained every weight (no train.lora); export without --adapter",
        )
    tokenizer = [p for p in hf_files(checkpoint) if p.name in TOKENIZER_FILES]
    return sorted([folder / n for n in ADAPTER_FILES] + tokenizer, key=lambda p: p.name)


def _check_destination(out: Path, checkpoint: Path, force: bool) -> None:
    out_abs, source = out.resolve(), checkpoint.resolve()
    if out_abs == source or out_abs in source.parents:
        raise ExportError(
            f"{out} holds the checkpoint being exported", "pick an OUT_DIR outside the run folder"
        )
    if source.parent in out_abs.parents:
        raise ExportError(
            f"{out} is inside the run's checkpoints folder", "pick an OUT_DIR outside it"
        )
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder", "pick another OUT_DIR")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(
            f"{out} exists and is not empty", "pick another OUT_DIR, or pass --force to replace it"
        )


def export_policy(
    checkpoint: Path, out: Path, *, force: bool = False, adapter: bool = False
) -> list[Path]:
    """Copy the Hugging Face files of `checkpoint` (or, `adapter`, its LoRA adapter and
    tokenizer) into `out`; returns the files written."""
    files = adapter_files(checkpoint) if adapter else hf_files(checkpoint)
    _check_destination(out, checkpoint, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-export-{os.getpid()}"
    old = out.parent / f".{out.name}.old-export-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for src in files:
            shutil.copyfile(src, tmp / src.name)
            fsync_path(tmp / src.name)
        fsync_path(tmp)
        if out.is_dir() and any(out.iterdir()):  # --force: swap, then drop the old folder
            os.replace(out, old)
        os.replace(tmp, out)  # replaces an empty folder too
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            os.replace(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
    fsync_path(out.parent)
    return [out / src.name for src in files]

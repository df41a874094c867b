"""A checkpoint's training state, which only resuming reads, and dropping it to save disk.

With `run.keep_optimizer: last` every checkpoint but the newest loses, once a newer one is
in place, the files only `roll resume` reads: the optimizer and scheduler states
(`actor_optim.pt`, the `fsdp2/` and `deepspeed/` partitions) and the critic (`critic.pt`,
ppo). About two thirds of a full-weight checkpoint go with them (AdamW keeps two fp32
moments per weight: 1,027 of 1,543 MiB for smollm2-135m, docs/runs.md). What `roll export`
and `roll eval --model RUN` read, the Hugging Face folder (weights, configs, tokenizer,
`adapter/`), stays, and so do the small files (`trainer_state.json`, `rng.pt`).

`NO_OPTIMIZER` is written (and flushed) before anything is deleted, so a checkpoint that is
missing part of its state always says so, even if the process died half-way through.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rollcli.config.strategy_spec import STRATEGIES
from rollcli.runs.checkpoint import fsync_path

# what only resuming reads (workers/trained_model.py, workers/critic.py, the strategies:
# their rows' `checkpoint_dir`, fsdp2/ and deepspeed/)
RESUME_ONLY = (
    "actor_optim.pt",
    "critic.pt",
    *(s.checkpoint_dir for s in STRATEGIES.values() if s.checkpoint_dir),
)
DROPPED_MARKER = "NO_OPTIMIZER"


def resumable(checkpoint: Path) -> bool:
    """Whether `checkpoint` still holds the state a resume loads."""
    return not (checkpoint / DROPPED_MARKER).exists()


def drop_optimizer_states(checkpoint: Path) -> int:
    """Delete `checkpoint`'s resume-only files (marked first); the bytes freed."""
    present = [checkpoint / name for name in RESUME_ONLY if (checkpoint / name).exists()]
    if not resumable(checkpoint) and not present:
        return 0
    (checkpoint / DROPPED_MARKER).write_text(
        "optimizer and critic states dropped (run.keep_optimizer: last): exportable and "
        "evaluable, not resumable\n",
        encoding="utf-8",
    )
    fsync_path(checkpoint / DROPPED_MARKER)
    fsync_path(checkpoint)
    freed = 0
    for path in present:
        if path.is_dir():
            freed += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
            shutil.rmtree(path)
        else:
            freed += path.stat().st_size
            path.unlink()
    return freed


def drop_all_but_newest(complete: list[tuple[int, Path]]) -> int:
    """`run.keep_optimizer: last`: drop the states of every checkpoint in `complete` (sorted
    by step, as `complete_checkpoints` returns them) but the newest; the bytes freed."""
    return sum(drop_optimizer_states(path) for _, path in complete[:-1])


def not_resumable_message(checkpoint: Path, run_id: str) -> str:
    """The one line `roll resume` refuses a checkpoint without its states with."""
    return (
        f"run {run_id!r}: checkpoint {checkpoint.name} has no optimizer state "
        "(run.keep_optimizer: last dropped it; the newer checkpoint that kept it is gone), so "
        f"it cannot be resumed; export or evaluate it, or train from it with --model {run_id}"
    )

"""Two (or N) gloo ranks of `FSDP2Trainer` in processes of their own, and the one-process
`HFTrainer` run they must match: the batch, the loss and the schedule both sides use.

`run_ranks(world, folder, mode, model_path)` spawns the ranks; each writes what the test
compares into `folder` (rank 0 the gathered weights, every rank its metrics). Modes:
`train` (two updates, a checkpoint between them; then a fresh model and trainer in the same
processes load that checkpoint and make the second update again, `reload`) and `resume` (new
processes do that: only the checkpoint survives from the first run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

ROWS, WIDTH, MINI, MICRO = 4, 10, 4, 2  # one optimizer step per update, two micro-batches
LR = 1e-2
PRELOAD = [
    "fsdp2_ranks",
    "rollcli.strategies.fsdp2_train",
    "rollcli.strategies.hf_model",
    "torch.distributed.checkpoint",
    "transformers.models.llama.modeling_llama",
]
CLIP = 1.0  # below both updates' gradient norms (4.9, 3.5): clipping by the global norm runs


def batch() -> Any:
    """Four rows of random tokens, the last two shorter (padding on the right)."""
    from rollcli.data.batch import Batch

    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 500, (ROWS, WIDTH), generator=gen)
    mask = torch.ones(ROWS, WIDTH, dtype=torch.long)
    mask[2:, 7:] = 0
    return Batch({"input_ids": ids, "attention_mask": mask})


def in_order(mini_batch: Any, size: int) -> list[tuple[torch.Tensor, Any]]:
    """Micro-batches of `size` rows in row order (the split both sides share)."""
    out = []
    for start in range(0, len(mini_batch), size):
        idx = torch.arange(start, min(start + size, len(mini_batch)))
        out.append((idx, mini_batch.select(idx)))
    return out


def loss_fn(model: torch.nn.Module) -> Any:
    """Mean next-token NLL of a micro-batch's real tokens."""

    def loss(micro: Any) -> tuple[torch.Tensor, dict[str, float]]:
        labels = micro["input_ids"].masked_fill(micro["attention_mask"] == 0, -100)
        out = model(input_ids=micro["input_ids"], attention_mask=micro["attention_mask"])
        logits = out.logits[:, :-1].float()
        value = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)
        )
        return value, {"nll": float(value.detach())}

    return loss


def trainer_args() -> Any:
    """The step size, clipping, and a warm-up and a decay, so that a resumed scheduler that
    forgot its place shows."""
    from rollcli.strategies.trainer import TrainerArgs

    return TrainerArgs(lr=LR, grad_clip=CLIP, warmup_steps=2, total_steps=3, lr_schedule="linear")


def update(trainer: Any, rows: Any, world: int) -> dict[str, float]:
    return trainer.update(
        rows,
        loss_fn=loss_fn(trainer.model),
        mini_batch_size=MINI // world,
        micro_batch_size=MICRO,
        micro_batches=in_order,
        dropout=False,
    )


def hf_reference(model_path: str, steps: int = 2) -> tuple[list[dict], list[dict]]:
    """The one-process `HFTrainer` run on the whole batch: per update, the metrics and the
    weights after it."""
    from rollcli.strategies.hf_model import load_causal_lm
    from rollcli.strategies.hf_train import HFTrainer

    model = load_causal_lm(model_path, train=True)
    trainer = HFTrainer(model, trainer_args())
    metrics, weights = [], []
    for _ in range(steps):
        metrics.append(update(trainer, batch(), 1))
        weights.append({k: v.clone() for k, v in model.state_dict().items()})
    return metrics, weights


def _rank_main(rank: int, world: int, folder: str, mode: str, model_path: str) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    out = Path(folder)
    store = f"file://{out / f'store-{mode}'}"
    dist.init_process_group("gloo", init_method=store, rank=rank, world_size=world)
    try:
        share = MINI // world
        rows = batch().select(list(range(rank * share, (rank + 1) * share)))
        if mode == "train":
            trainer = _trainer(model_path, rank, world)
            metrics = [update(trainer, rows, world)]
            _save_weights(trainer, out / "step-1.pt")
            trainer.save_checkpoint(out / "ckpt")
            if rank == 0:
                torch.save(trainer.state_dict(), out / "ckpt" / "small.pt")
            metrics.append(update(trainer, rows, world))
            _save_weights(trainer, out / "train-step-2.pt")
            torch.save(metrics, out / f"train-metrics-{rank}.pt")
            del trainer  # a fresh model and trainer in this process: `reload`
            mode = "reload"
        trainer = _trainer(model_path, rank, world)
        trainer.load_state_dict(torch.load(out / "ckpt" / "small.pt"))
        trainer.load_checkpoint(out / "ckpt")
        torch.save([update(trainer, rows, world)], out / f"{mode}-metrics-{rank}.pt")
        _save_weights(trainer, out / f"{mode}-step-2.pt")
    finally:
        dist.destroy_process_group()


def _trainer(model_path: str, rank: int, world: int) -> Any:
    from rollcli.strategies.fsdp2_train import FSDP2Trainer
    from rollcli.strategies.hf_model import load_causal_lm

    model = load_causal_lm(model_path, train=True)
    return FSDP2Trainer(model, trainer_args(), rank=rank, world_size=world)


def _save_weights(trainer: Any, path: Path) -> None:
    with trainer.full_weights() as model:  # every rank gathers; rank 0 holds the copy
        if model is not None:
            torch.save({k: v.clone() for k, v in model.state_dict().items()}, path)


def run_ranks(world: int, folder: Path, mode: str, model_path: str) -> None:
    """Spawn `world` gloo ranks running `mode` (`train` or `resume`); raises if one fails."""
    import torch.multiprocessing as mp

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # A fork server: a clean process (no Ray threads, no process group of this test
    # session's) that imports torch and transformers once; each rank is a fork of it.
    mp.get_context("forkserver").set_forkserver_preload(PRELOAD)
    args = (world, str(folder), mode, model_path)
    mp.start_processes(_rank_main, args=args, nprocs=world, join=True, start_method="forkserver")

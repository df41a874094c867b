"""What a checkpoint costs: time to save and to load one, and its size on disk, per part.

    .venv/bin/python bench/checkpoint.py                 # smollm2-135m
    .venv/bin/python bench/checkpoint.py --model tiny-random --repeats 1

Builds the actor_train worker (no Ray), takes one optimizer step so AdamW holds its moment
estimates, then writes checkpoints exactly as a run does (policy as a Hugging Face folder,
optimizer + scheduler, every RNG, driver state; fsync; rename) and loads them back into a
fresh worker. Prints a table; the median of `--repeats` is reported.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from rollcli.models.loading import resolve_model
from rollcli.runs.checkpoint import write_checkpoint
from rollcli.runs.rng import capture_rng
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs


def _one_step(worker: ActorTrainWorker) -> None:
    ids = torch.randint(0, worker.model.config.vocab_size, (2, 32))
    loss = worker.model(input_ids=ids).logits.float().logsumexp(-1).mean()
    loss.backward()
    worker.trainer.optimizer.step()
    worker.trainer.optimizer.zero_grad()


def _sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="Where to write (default: a temp folder).")
    args = parser.parse_args()

    console = Console()
    model_path = str(resolve_model(args.model))
    threads = torch.get_num_threads()
    worker = ActorTrainWorker(
        TrainedModelArgs(model_path, trainer=TrainerArgs(lr=1e-5), num_threads=threads)
    )
    _one_step(worker)
    fresh = ActorTrainWorker(
        TrainedModelArgs(model_path, trainer=TrainerArgs(lr=1e-5), num_threads=threads)
    )
    _one_step(fresh)  # same tensor shapes in the optimizer before loading

    root = Path(args.dir or tempfile.mkdtemp(prefix="roll-ckpt-bench-"))
    saves, loads, sizes = [], [], {}
    for i in range(args.repeats):

        def fill(folder: Path) -> None:
            worker.save_pretrained(str(folder))
            worker.save_state(str(folder))
            torch.save({"driver": capture_rng(), "actor_train": [capture_rng()]}, folder / "rng.pt")

        t0 = time.perf_counter()
        path = write_checkpoint(root, i + 1, fill, {"step": i + 1}, keep_last=1)
        saves.append(time.perf_counter() - t0)
        sizes = _sizes(path)
        t0 = time.perf_counter()
        fresh.load_state(str(path))
        loads.append(time.perf_counter() - t0)

    after = fresh.model.state_dict()
    same = all(torch.equal(v, after[k]) for k, v in worker.model.state_dict().items())
    params = sum(p.numel() for p in worker.model.parameters())
    table = Table(title=f"checkpoint of {args.model} ({params / 1e6:.0f}M parameters, fp32)")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("save (write + fsync + rename), median", f"{statistics.median(saves):.2f} s")
    table.add_row("load into a running worker, median", f"{statistics.median(loads):.2f} s")
    for name, size in sorted(sizes.items(), key=lambda kv: -kv[1]):
        table.add_row(f"  {name}", f"{size / 2**20:,.1f} MiB")
    table.add_row("total on disk", f"{sum(sizes.values()) / 2**20:,.1f} MiB")
    table.add_row("weights equal after load", "yes" if same else "NO")
    console.print(table)
    console.print(f"threads {threads}; repeats {args.repeats}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

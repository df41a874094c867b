"""The seam between a worker and its training backend: the recipe's optimizer settings as one
frozen `TrainerArgs`, and the `Trainer` Protocol every strategy implements.

`runtime/workers_setup.trainer_args` builds `TrainerArgs` from the recipe's `train.*` keys;
the worker hands it unchanged to `train_engines.make_trainer`, which hands it to the
strategy's trainer, which builds AdamW and its schedule from it (`hf_train.adamw_with_schedule`,
DeepSpeed's own AdamW). No keyword dicts on the way, so `train.lr` can be followed from the
recipe to the optimizer.

The update itself (epochs x mini-batches x micro-batches) is written once, in
`update_loop.UpdateLoop`; each strategy supplies only its hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from rollcli.algorithms.loss_metrics import Metric
from rollcli.data.batch import Batch
from rollcli.strategies.lr_schedule import LrFactor, Schedule

# micro-batch (with normalisers: and the mini-batch's summed denominators) -> (loss, metrics)
LossFn = Callable[..., tuple[torch.Tensor, Mapping[str, Metric]]]
# (mini-batch, micro-batch size) -> [(row indices, micro-batch)]
MicroBatchFn = Callable[[Batch, int], list[tuple[torch.Tensor, Batch]]]
# a mini-batch -> the denominators of its loss (`aggregation.loss_normalisers`)
NormalisersFn = Callable[[Batch], torch.Tensor]


@dataclass(frozen=True)
class TrainerArgs:
    """AdamW's settings and the learning-rate schedule, as the recipe's `train.*` keys give
    them (`lr`, `betas`, `weight_decay`, `grad_clip`, `warmup_steps`, `steps`,
    `lr_schedule`, `lr_decay_steps`, `min_lr_ratio`). `grad_clip=None`: no clipping.

    >>> args = TrainerArgs(lr=1e-3, warmup_steps=2, total_steps=4, lr_schedule="linear")
    >>> [args.lr_factor()(step) for step in range(3)]
    [0.5, 1.0, 1.0]
    """

    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    warmup_steps: int = 0
    total_steps: int = 1
    lr_schedule: Schedule = "constant"
    lr_decay_steps: int | None = None
    min_lr_ratio: float = 0.0

    def lr_factor(self) -> LrFactor:
        """A fresh multiplier of `lr` for torch's `LambdaLR` (it counts the updates, so every
        trainer gets its own)."""
        return LrFactor(
            warmup_steps=self.warmup_steps,
            total_steps=self.total_steps,
            schedule=self.lr_schedule,
            decay_steps=self.lr_decay_steps,
            min_lr_ratio=self.min_lr_ratio,
        )


class Trainer(Protocol):
    """What a worker asks of its training strategy (hf, fsdp2, deepspeed; megatron refuses
    to start until its weight map is written: `megatron_train.py`)."""

    model: torch.nn.Module
    """The module forwards run through: the model itself, its FSDP2-sharded self, or
    DeepSpeed's engine around it."""

    def update(
        self,
        batch: Batch,
        *,
        loss_fn: LossFn,
        mini_batch_size: int | None,
        micro_batch_size: int,
        epochs: int = 1,
        micro_batches: MicroBatchFn = ...,
        normalisers: NormalisersFn | None = None,
        dropout: bool = True,
    ) -> dict[str, float]:
        """Optimise `loss_fn` over `batch`: epochs x mini-batches (one optimizer step each) x
        micro-batches (gradient accumulation); returns the metrics (`update_loop.py`)."""
        ...

    def full_weights(self) -> AbstractContextManager[torch.nn.Module | None]:
        """The module with every parameter whole, for `save_pretrained` and the weight sync;
        every rank must enter (a ZeRO-3 or FSDP2 gather is collective)."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """What goes in `actor_optim.pt` (hf: the optimizer and scheduler themselves)."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def save_checkpoint(self, folder: str | Path) -> None:
        """Write the strategy's own partitioned files under `folder` (hf: none)."""
        ...

    def load_checkpoint(self, folder: str | Path) -> None: ...

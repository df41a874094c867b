"""The one update loop of every training strategy: epochs x mini-batches (one optimizer step
each) x micro-batches (gradient accumulation) with a caller-given loss.

`UpdateLoop.update` is written once; a strategy supplies four hooks, what differs between
backends:
- `_train_mode(dropout)`: put the module in training mode;
- `_start_step()`: before a mini-batch's micro-batches (hf, fsdp2: zero the gradients);
- `_step_scope()`: the context its micro-batches run in (default none);
- `_backward(loss, last)`: one micro-batch's backward (DeepSpeed: its engine's backward and
  step, with the accumulation boundary at the `last` micro-batch);
- `_finish_step()`: after a mini-batch's micro-batches, clip and step the optimizer and
  return the gradient norm (DeepSpeed: its engine stepped already; only the norm).
and the `scheduler` whose rate the metrics report.

With `world_size > 1` (data parallel) each rank runs its share of every mini-batch and the
strategies average the gradients, so every rank makes the same step.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext

import torch

from rollcli.algorithms.loss_metrics import Metric
from rollcli.data.batch import Batch
from rollcli.data.micro_batch import length_sorted_micro_batches
from rollcli.strategies.lr_schedule import finish_update
from rollcli.strategies.step_metrics import StepMetrics
from rollcli.strategies.trainer import LossFn, MicroBatchFn, NormalisersFn


def micro_batch_losses(
    mini_batch: Batch,
    loss_fn: LossFn,
    normalisers: NormalisersFn | None,
    world_size: int,
) -> LossFn:
    """`micro-batch -> (loss to backpropagate, metrics)` for the micro-batches of
    `mini_batch`, so that the accumulated gradient is the mini-batch's.

    Without `normalisers`, `loss_fn(micro)` is a mean over its rows and is weighted by its
    share of the mini-batch's rows. With them, the mini-batch's denominators are computed
    here once and summed over the `world_size` data-parallel ranks (a collective: every
    rank calls this once per mini-batch), and `loss_fn(micro, totals)` returns the
    micro-batch's exact share of the whole mini-batch's loss; it is scaled by `world_size`
    because the strategies average gradients over ranks. The shares then add up to one
    full-batch computation whatever the split into micro-batches and ranks."""
    if normalisers is None:

        def row_weighted(micro: Batch) -> tuple[torch.Tensor, Mapping[str, Metric]]:
            loss, metrics = loss_fn(micro)
            return loss * (len(micro) / len(mini_batch)), metrics

        return row_weighted
    totals = normalisers(mini_batch)
    if world_size > 1:
        import torch.distributed as dist

        # nccl reduces only device tensors; gloo the CPU's
        device = "cuda" if dist.get_backend() == "nccl" else "cpu"
        on_device = totals.to(device)
        dist.all_reduce(on_device)
        totals = on_device.cpu()

    def share(micro: Batch) -> tuple[torch.Tensor, Mapping[str, Metric]]:
        loss, metrics = loss_fn(micro, totals)
        return loss * world_size, metrics

    return share


def train_mode(model: torch.nn.Module, dropout: bool = True) -> None:
    """Put `model` in training mode; `dropout=False`: `model.eval()` semantics for every
    module (dropout off, so the loss's log-probs are the ones `compute_logprobs` computes
    in eval mode), gradients still on. A layer that checkpoints its activations keeps its
    own `training` flag set (transformers checkpoints only when it is), not its
    sub-modules' (where the dropout is), so gradient checkpointing still runs."""
    model.train()
    if dropout:
        return
    model.eval()
    for module in model.modules():
        if getattr(module, "gradient_checkpointing", False) is True:
            module.training = True


class UpdateLoop:
    """The update of `trainer.Trainer`, over a strategy's hooks (module docstring)."""

    world_size: int
    scheduler: torch.optim.lr_scheduler.LRScheduler

    def update(
        self,
        batch: Batch,
        *,
        loss_fn: LossFn,
        mini_batch_size: int | None,
        micro_batch_size: int,
        epochs: int = 1,
        micro_batches: MicroBatchFn = length_sorted_micro_batches,
        normalisers: NormalisersFn | None = None,
        dropout: bool = True,
    ) -> dict[str, float]:
        """Optimise `loss_fn` over `batch` (data parallel: this rank's share;
        `mini_batch_size` is then the per-rank size); returns its metrics averaged over
        micro-batches (`(value, weight)` metrics weighted, see `step_metrics`).
        `dropout=False`: the model's dropout is off during the update (`train_mode`).

        `micro_batches` splits a mini-batch (default: rollout rows sorted by length and
        trimmed); pipelines with another row layout pass their own. With `normalisers`,
        `loss_fn(micro, totals)` returns the micro-batch's share of its mini-batch's loss
        (see `micro_batch_losses`) and `loss` (the mini-batch's loss) is reported."""
        self._train_mode(dropout)
        mini = mini_batch_size or len(batch)
        step_metrics = StepMetrics()
        grad_norms: list[float] = []
        losses: list[float] = []
        for _ in range(epochs):
            for mini_batch in batch.split(mini):
                self._start_step()
                micro_loss = micro_batch_losses(mini_batch, loss_fn, normalisers, self.world_size)
                micros = micro_batches(mini_batch, micro_batch_size)
                total = 0.0
                with self._step_scope():
                    for i, (_, micro) in enumerate(micros):
                        loss, metrics = micro_loss(micro)
                        self._backward(loss, last=i == len(micros) - 1)
                        total += float(loss.detach())
                        step_metrics.add(metrics)
                losses.append(total)
                grad_norms.append(self._finish_step())
        out = step_metrics.means(self.world_size)
        if normalisers is not None:  # a rank's sum x N: its mean over ranks is the loss
            out["loss"] = sum(losses) / len(losses)
        out["grad_norm"] = sum(grad_norms) / len(grad_norms)
        out["lr"] = self.scheduler.get_last_lr()[0]
        finish_update(self.scheduler)
        return out

    # ---- the hooks: what a strategy supplies ----------------------------------------------
    def _train_mode(self, dropout: bool) -> None:
        raise NotImplementedError

    def _start_step(self) -> None:
        raise NotImplementedError

    def _step_scope(self) -> AbstractContextManager:
        """Where a mini-batch's micro-batches run (hf in bf16-mixed: autocast's casts kept
        for all of them, `precision.kept_casts`)."""
        return nullcontext()

    def _backward(self, loss: torch.Tensor, last: bool) -> None:
        raise NotImplementedError

    def _finish_step(self) -> float:
        raise NotImplementedError

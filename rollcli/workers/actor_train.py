"""actor_train of the RL pipelines (rlvr, agentic): the trained model (`trained_model.py`)
and the policy update, whose objective is `algorithms/objective.py`."""

from __future__ import annotations

import functools

import torch

from rollcli.algorithms.loss_metrics import Metric
from rollcli.algorithms.objective import rl_loss, rl_normalisers, rows_with_gradient
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import RESPONSE_MASK
from rollcli.distributed import data_parallel
from rollcli.strategies.device import batch_to, to_cpu
from rollcli.strategies.logprob_forward import logprob_forward, model_inputs
from rollcli.workers.trained_model import TrainedModelWorker


class ActorTrainWorker(TrainedModelWorker):
    def train_step(self, batch: Batch, args: PolicyUpdateArgs) -> dict[str, float]:
        """One policy update over the batch (`advantages`, `response_mask`, and `old_logprobs`
        unless the update is on-policy: one epoch, one mini-batch). With an `action_mask`
        (agentic: each reply's first action token) the entropy bonus is taken over those
        tokens only and their mean entropy is reported as `action_entropy`.

        Every micro-batch's loss is its share of the whole mini-batch's (over all ranks),
        so the step does not depend on how rows are split into micro-batches
        (`aggregation.micro_batch_share`); `norm_len` defaults to the batch's padded
        response width, the same in every micro-batch and on every rank.

        With the hf strategy, rows whose gradient is exactly 0 (`rows_with_gradient`: e.g.
        raftpp's below-the-mean episodes, or a group whose advantages are all 0, when no
        entropy bonus or KL term is on) skip their forward and backward; the step is the
        same, and `trained_rows_frac` says what share of the rows were computed. Other
        strategies gather weights inside the forward, so every rank runs every row."""
        norm_len = args.norm_len or batch[RESPONSE_MASK].shape[1]
        micro_batcher, forward = logprob_forward(args.shared_prefix)

        def loss_fn(micro: Batch, totals: torch.Tensor) -> tuple[torch.Tensor, dict[str, Metric]]:
            with self._compute():
                micro = batch_to(micro, self.device)
                logprobs, entropy = forward(
                    self.model,
                    model_inputs(micro),
                    temperature=args.temperature,
                    with_entropy=True,
                    head_mask=micro[RESPONSE_MASK] > 0,  # every term is over the loss mask
                )
                return rl_loss(micro, logprobs, entropy, args, norm_len, totals)

        mini = args.mini_batch_size
        budget = data_parallel.token_budget(self.strategy, self.world_size, args.micro_batch_tokens)
        split = functools.partial(micro_batcher, max_tokens=budget)
        skip = self.strategy_spec.skips_rows  # hf: its ranks meet once per optimizer step
        metrics = self.trainer.update(
            batch,  # data parallel: this rank's share, `mini / world_size` rows per step
            loss_fn=loss_fn,
            mini_batch_size=mini // self.world_size if mini else None,
            micro_batch_size=args.micro_batch_size,
            epochs=args.epochs,
            micro_batches=_rows_with_gradient(split, args) if skip else split,
            normalisers=functools.partial(rl_normalisers, args=args),
            dropout=False,  # the policy gradient of the policy that sampled: no dropout
        )
        if skip:
            metrics["trained_rows_frac"] = float(rows_with_gradient(batch, args).float().mean())
        return to_cpu(metrics)


def _rows_with_gradient(split, args: PolicyUpdateArgs):  # noqa: ANN001, ANN202
    """`split` (a micro-batcher) over the rows of each mini-batch that have a gradient; all
    of them when none has (the optimizer then steps on zero gradients, as it would anyway)."""

    def micro_batches(mini: Batch, size: int) -> list[tuple[torch.Tensor, Batch]]:
        keep = rows_with_gradient(mini, args)
        if bool(keep.all()) or not bool(keep.any()):
            return split(mini, size)
        rows = keep.nonzero().squeeze(1)
        return [(rows[idx], micro) for idx, micro in split(mini.select(rows), size)]

    return micro_batches

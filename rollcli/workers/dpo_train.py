"""actor_train for DPO: the preference loss on pair batches (`rollcli.data.pairs` layout,
with the reference's log-probs in `ref_logprobs`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from rollcli.algorithms.dpo_loss import dpo_loss, sequence_logprob
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import REF_LOGPROBS, RESPONSE_MASK
from rollcli.data.pairs import pair_micro_batches
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.workers.trained_model import TrainedModelWorker


@dataclass(frozen=True)
class DPOArgs:
    loss_type: str = "sigmoid"
    beta: float = 0.1
    label_smoothing: float = 0.0
    micro_batch_size: int = 4  # pairs per forward / backward
    micro_batch_tokens: int | None = None  # padded tokens per forward / backward


def pair_scores(logprobs: torch.Tensor, mask: torch.Tensor, average: bool) -> torch.Tensor:
    """`[2N, R]` token log-probs of interleaved pair rows → `[N, 2]` (chosen, rejected)."""
    return sequence_logprob(logprobs, mask, average).view(-1, 2)


class DPOTrainWorker(TrainedModelWorker):
    def dpo_step(self, batch: Batch, args: DPOArgs) -> dict[str, float]:
        """One optimizer step on the mean preference loss of the batch's pairs. The trainer
        weighs a micro-batch's loss by its share of rows but averages metrics over
        micro-batches, so the metrics are scaled to the batch's row means too (micro-batches
        split by `micro_batch_tokens` are uneven; `parts` is the trainer's split, counted)."""
        average = args.loss_type == "ipo"
        parts = pair_micro_batches(batch, args.micro_batch_size, max_tokens=args.micro_batch_tokens)

        def loss_fn(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
            mask = micro[RESPONSE_MASK]
            logprobs, _ = response_logprobs(self.model, model_inputs(micro))
            pi = pair_scores(logprobs, mask, average)
            ref = pair_scores(micro[REF_LOGPROBS], mask, average)
            loss, metrics = dpo_loss(
                pi[:, 0],
                pi[:, 1],
                ref[:, 0],
                ref[:, 1],
                beta=args.beta,
                loss_type=args.loss_type,
                label_smoothing=args.label_smoothing,
            )
            metrics["logps/chosen"] = float(pi[:, 0].detach().mean())
            metrics["logps/rejected"] = float(pi[:, 1].detach().mean())
            share = len(micro) / len(batch) * len(parts)  # of the batch's rows, x micro-batches
            return loss, {k: v * share for k, v in metrics.items()}

        return self.trainer.update(
            batch,
            loss_fn=loss_fn,
            mini_batch_size=None,
            micro_batch_size=args.micro_batch_size,
            micro_batches=functools.partial(pair_micro_batches, max_tokens=args.micro_batch_tokens),
        )

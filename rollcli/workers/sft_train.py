"""actor_train for supervised fine-tuning: next-token loss on the assistant tokens of
(packed) sequence rows, the held-out loss, and answers to held-out prompts."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from rollcli.data.batch import Batch
from rollcli.data.packing import sequence_micro_batches
from rollcli.strategies.hf_sequence import target_logits
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.generation import generate_texts
from rollcli.workers.trained_model import TrainedModelWorker


class SFTTrainWorker(TrainedModelWorker):
    def sft_step(
        self, batch: Batch, *, micro_batch_size: int, micro_batch_tokens: int | None = None
    ) -> dict[str, float]:
        """One optimizer step on the mean negative log-likelihood of the batch's loss tokens
        (micro-batches of at most `micro_batch_size` rows and `micro_batch_tokens` tokens)."""
        total = max(int(batch.meta["targets"]), 1)
        rows = len(batch)
        micro_batches = functools.partial(sequence_micro_batches, max_tokens=micro_batch_tokens)
        n_micro = len(micro_batches(batch, micro_batch_size))

        def loss_fn(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
            logits, labels = target_logits(self.model, micro)
            nll = F.cross_entropy(logits.float(), labels, reduction="sum")
            # The trainer weighs a micro-batch by its share of rows and averages metrics
            # over micro-batches; these factors make both the exact token mean of the batch.
            loss = nll / total * (rows / len(micro))
            return loss, {"loss": float(nll.detach()) / total * n_micro}

        return self.trainer.update(
            batch,
            loss_fn=loss_fn,
            mini_batch_size=None,
            micro_batch_size=micro_batch_size,
            micro_batches=micro_batches,
        )

    @torch.no_grad()
    def eval_loss(
        self, batch: Batch, micro_batch_size: int = 8, micro_batch_tokens: int | None = None
    ) -> dict[str, float]:
        """Token-mean negative log-likelihood of the loss tokens (and their count)."""
        self.model.eval()
        return sequence_nll(self.model, batch, micro_batch_size, micro_batch_tokens)

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
        return generate_texts(self.model, self.tokenizer, prompts, params)


@torch.no_grad()
def sequence_nll(
    model,  # noqa: ANN001
    batch: Batch,
    micro_batch_size: int,
    max_tokens: int | None = None,
) -> dict[str, float]:
    nll, count = 0.0, 0
    for _, micro in sequence_micro_batches(batch, micro_batch_size, max_tokens):
        logits, labels = target_logits(model, micro)
        nll += float(F.cross_entropy(logits.float(), labels, reduction="sum"))
        count += len(labels)
    return {"loss": nll / max(count, 1), "tokens": float(count)}

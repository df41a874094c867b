"""actor_train and reference for multi-turn samples, whose loss mask has holes.

In an agentic sample the "response" is the rest of the conversation: the model's replies
with the environment's turns in between, and `response_mask` is 1 only on the replies. The
rollout micro-batcher trims each micro-batch to its longest `response_mask.sum()`, which
would cut the later turns off; these workers use `turn_micro_batches`, which trims to the
last attended column instead. Everything else is the RLVR worker's.
"""

from __future__ import annotations

import functools

import torch

from rollcli.data.batch import Batch
from rollcli.data.micro_batch import RESPONSE_KEYS, SEQUENCE_KEYS, scatter_rows
from rollcli.strategies.hf_model import response_logprobs
from rollcli.workers.actor_train import ActorTrainWorker, model_inputs
from rollcli.workers.reference import ReferenceWorker


def trim_to_attention(batch: Batch) -> Batch:
    """Drop the columns that are padding in every row: left of the prompts, and right of
    each row's last attended response token (not its last loss token)."""
    width = int(batch["prompt_width"][0])
    attention = batch["attention_mask"]
    response_len = max(int(attention[:, width:].sum(dim=1).max().item()), 1)
    left_pad = int((width - attention[:, :width].sum(dim=1)).min().item())
    tensors = dict(batch.tensors)
    for key in SEQUENCE_KEYS:
        if key in tensors:
            tensors[key] = tensors[key][:, left_pad : width + response_len]
    for key in RESPONSE_KEYS:
        if key in tensors:
            tensors[key] = tensors[key][:, :response_len]
    tensors["prompt_width"] = batch["prompt_width"] - left_pad
    return Batch(tensors, dict(batch.fields), dict(batch.meta))


def turn_micro_batches(batch: Batch, size: int) -> list[tuple[torch.Tensor, Batch]]:
    """`(row_indices, micro_batch)` pairs of rows of similar length, each trimmed."""
    order = torch.argsort(batch["attention_mask"].sum(dim=1), stable=True)
    return [
        (idx, trim_to_attention(batch.select(idx)))
        for idx in (order[s : s + size] for s in range(0, len(batch), size))
    ]


def turn_logprobs(model, batch: Batch, micro_batch_size: int, temperature: float) -> torch.Tensor:  # noqa: ANN001
    parts = [
        (idx, response_logprobs(model, model_inputs(micro), temperature=temperature)[0])
        for idx, micro in turn_micro_batches(batch, micro_batch_size)
    ]
    return scatter_rows(parts, len(batch), batch["response_mask"].shape[1])


class AgenticTrainWorker(ActorTrainWorker):
    def __init__(self, model_path: str, **kwargs) -> None:  # noqa: ANN003
        super().__init__(model_path, **kwargs)
        # the trainer's micro-batch splitter is a parameter of `update`: bind ours
        self.trainer.update = functools.partial(
            type(self.trainer).update, self.trainer, micro_batches=turn_micro_batches
        )

    @torch.no_grad()
    def compute_logprobs(
        self, batch: Batch, micro_batch_size: int = 8, temperature: float = 1.0
    ) -> torch.Tensor:
        self.model.eval()
        return turn_logprobs(self.model, batch, micro_batch_size, temperature)


class AgenticReferenceWorker(ReferenceWorker):
    @torch.no_grad()
    def compute_logprobs(
        self, batch: Batch, micro_batch_size: int = 8, temperature: float = 1.0
    ) -> torch.Tensor:
        return turn_logprobs(self.model, batch, micro_batch_size, temperature)

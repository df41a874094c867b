"""Log-probs of a batch's response tokens under a model: its inputs (`model_inputs`), the
micro-batching and forward of plain rows or the shared-prefix layout (`logprob_forward`),
and the whole batch's `[B, R]` (`forward_response_logprobs`), used by actor_train, the
reference and the critic alike."""

from __future__ import annotations

import torch

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import PROMPT_WIDTH, RESPONSE_MASK
from rollcli.data.micro_batch import length_sorted_micro_batches, scatter_rows
from rollcli.data.shared_prefix import shared_prefix_micro_batches
from rollcli.strategies.device import batch_to
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.hf_shared_prefix import shared_prefix_logprobs

MODEL_INPUTS = ("input_ids", "attention_mask", "position_ids", PROMPT_WIDTH)


def model_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    return {k: batch.tensors[k] for k in MODEL_INPUTS}


def logprob_forward(shared_prefix: bool):  # noqa: ANN201
    """`(micro-batcher, log-prob forward)`: the plain rows, length-sorted, or the
    shared-prefix layout (`rollcli.data.shared_prefix`), whose results are the same."""
    if shared_prefix:
        return shared_prefix_micro_batches, shared_prefix_logprobs
    return length_sorted_micro_batches, response_logprobs


def forward_response_logprobs(
    model,  # noqa: ANN001
    batch: Batch,
    micro_batch_size: int,
    temperature: float,
    device: torch.device | None = None,
    max_tokens: int | None = None,
    *,
    shared_prefix: bool = False,
) -> torch.Tensor:
    """`[B, R]` log-probs of the response tokens, computed on trimmed micro-batches moved
    to `device` (the model's): length-sorted plain rows, or with `shared_prefix` the
    shared-prefix layout; the result is on the CPU."""
    device = device or torch.device("cpu")
    micro_batcher, forward = logprob_forward(shared_prefix)
    parts = []
    for idx, micro in micro_batcher(batch, micro_batch_size, max_tokens):
        inputs = model_inputs(batch_to(micro, device))
        logprobs = forward(model, inputs, temperature=temperature)[0]
        parts.append((idx, logprobs.cpu()))
    return scatter_rows(parts, len(batch), batch[RESPONSE_MASK].shape[1])

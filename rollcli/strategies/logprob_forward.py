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
from rollcli.models.moe_routing import UNSET, unset_routing
from rollcli.strategies.device import batch_to
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.hf_shared_prefix import shared_prefix_logprobs
from rollcli.strategies.routing_replay import recorded_forwards, routing_inputs

MODEL_INPUTS = ("input_ids", "attention_mask", "position_ids", PROMPT_WIDTH)


def model_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    """What a forward reads of the batch: the rows, and an MoE model's routing records."""
    return {**{k: batch.tensors[k] for k in MODEL_INPUTS}, **routing_inputs(batch.tensors)}


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


def logprobs_and_routing(
    model,  # noqa: ANN001
    batch: Batch,
    micro_batch_size: int,
    temperature: float,
    device: torch.device | None = None,
    max_tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`forward_response_logprobs` on plain rows that also records the experts an MoE
    model's routers pick: `([B, R] log-probs, [B, P+R, layers, k] routing)`, the routing
    laid out like the batch's rows (UNSET on padding); R2's record of the old policy."""
    device = device or torch.device("cpu")
    width, columns = int(batch[PROMPT_WIDTH][0]), batch["input_ids"].shape[1]
    parts, routes = [], []
    for idx, micro in length_sorted_micro_batches(batch, micro_batch_size, max_tokens):
        inputs = model_inputs(batch_to(micro, device))
        with recorded_forwards(model) as record:
            logprobs = response_logprobs(model, inputs, temperature=temperature)[0]
        parts.append((idx, logprobs.cpu()))
        left = width - int(micro[PROMPT_WIDTH][0])  # the columns trim_padding cut
        recorded = record.routing(inputs["input_ids"].shape)
        recorded[~inputs["attention_mask"].bool().cpu()] = UNSET  # padding picks nothing
        routes.append((idx, left, recorded))
    routing = None
    for idx, left, r in routes:
        if routing is None:
            routing = unset_routing(len(batch) * columns, *r.shape[2:]).view(
                len(batch), columns, *r.shape[2:]
            )
        routing[idx, left : left + r.shape[1]] = r
    assert routing is not None, "an empty batch"
    return scatter_rows(parts, len(batch), batch[RESPONSE_MASK].shape[1]), routing

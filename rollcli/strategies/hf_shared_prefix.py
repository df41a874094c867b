"""Forward passes over the shared-prefix layout (`rollcli.data.shared_prefix`): response
log-probs for the actor and reference, values for the critic.

The layout's attention is handed to the model as one 4-D additive float mask, which
transformers passes to the attention kernel as it is (`sdpa`, roll's CPU `sdpa_gqa`,
`eager`).
Other attention implementations (flash attention reads no 4-D mask) are refused.
"""

from __future__ import annotations

import torch

from rollcli.algorithms.entropy import entropy_from_logits, logprobs_from_logits
from rollcli.data.batch_keys import PROMPT_WIDTH
from rollcli.data.shared_prefix import SharedPrefixLayout, shared_prefix_layout, take_positions
from rollcli.strategies.attention_masks import (
    MASKED_ATTENTION,
    additive_mask,
    attention_implementation,
    hf_module,
)
from rollcli.strategies.lm_head import head_logprobs, plain_head
from rollcli.strategies.routing_replay import batch_routing, routing_inputs


def attention_mask(model, layout: SharedPrefixLayout) -> torch.Tensor:  # noqa: ANN001
    """The layout's attention as one additive mask (`strategies.attention_masks`)."""
    impl = attention_implementation(model)
    if impl not in MASKED_ATTENTION:
        raise ValueError(
            f"train.shared_prefix needs the model's attention to be one of {MASKED_ATTENTION} "
            f"(it reads a 4-D mask); this model runs {impl!r}: set train.shared_prefix=false"
        )
    return additive_mask(model, layout.attention())


def check_window(model, layout: SharedPrefixLayout) -> None:  # noqa: ANN001
    """A sliding window cuts by column distance, which the packed rows change; it cuts
    nothing while a packed row fits in it (a plain row is never longer)."""
    window = getattr(hf_module(model).config, "sliding_window", None)
    if window is not None and layout.input_ids.shape[1] > window:
        raise ValueError(
            f"train.shared_prefix: a packed row of {layout.input_ids.shape[1]} tokens is "
            f"longer than the model's sliding window ({window}); set train.shared_prefix=false "
            "or a smaller train.micro_batch_tokens"
        )


def _layout(model, inputs: dict[str, torch.Tensor]) -> tuple[SharedPrefixLayout, torch.Tensor]:  # noqa: ANN001
    layout = shared_prefix_layout(
        inputs["input_ids"],
        inputs["attention_mask"],
        inputs["position_ids"],
        int(inputs[PROMPT_WIDTH][0]),
    )
    check_window(model, layout)
    return layout, attention_mask(model, layout)


def shared_prefix_logprobs(
    model,  # noqa: ANN001
    batch_tensors: dict[str, torch.Tensor],
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
    head_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`response_logprobs` (same inputs, same `[B, R]` outputs, `head_mask` too) computed
    on the shared-prefix layout: each distinct prompt of the micro-batch runs once (an MoE
    model's routing records packed the same way, `packed_routing`)."""
    layout, mask = _layout(model, batch_tensors)
    with batch_routing(model, packed_routing(layout, batch_tensors)):
        return _packed_logprobs(model, layout, mask, temperature, with_entropy, head_mask)


def packed_routing(
    layout: SharedPrefixLayout, batch_tensors: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The rows' routing records in the packed layout, and its real tokens as the mask."""
    packed = {k: layout.pack(v, fill=-1) for k, v in routing_inputs(batch_tensors).items()}
    return {**packed, "attention_mask": layout.segments >= 0}


def _packed_logprobs(
    model,  # noqa: ANN001
    layout: SharedPrefixLayout,
    mask: torch.Tensor,
    temperature: float,
    with_entropy: bool,
    head_mask: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    # of the layout's N response tokens, those whose log-probs are wanted
    wanted = None if head_mask is None else head_mask.bool()[layout.real]
    head = plain_head(model)
    if head is None:  # the model computes its logits (scaled heads, a DeepSpeed engine)
        first = int(layout.source[:, 1].min()) if len(layout.source) else 0
        keep = layout.input_ids.shape[1] - first
        logits = model(
            input_ids=layout.input_ids,
            attention_mask=mask,
            position_ids=layout.position_ids,
            use_cache=False,
            logits_to_keep=keep,
        ).logits
        shifted = layout.source - torch.tensor([0, first], device=layout.source.device)
        picked = take_positions(logits, shifted)
        if temperature != 1.0:
            picked = picked / temperature
        logprobs = _keep(layout, logprobs_from_logits(picked, layout.labels), wanted)
        if not with_entropy:
            return logprobs, None
        return logprobs, _keep(layout, entropy_from_logits(picked), wanted)
    hidden = model.get_decoder()(
        input_ids=layout.input_ids,
        attention_mask=mask,
        position_ids=layout.position_ids,
        use_cache=False,
    ).last_hidden_state
    picked, labels = layout.pick(hidden), layout.labels
    if wanted is not None:
        picked, labels = picked[wanted], labels[wanted]
    logprobs, entropy = head_logprobs(
        head, picked, labels, temperature=temperature, with_entropy=with_entropy
    )
    logprobs = _spread(layout, logprobs, wanted)
    return logprobs, (_spread(layout, entropy, wanted) if with_entropy else None)


def _spread(layout, values: torch.Tensor, wanted: torch.Tensor | None) -> torch.Tensor:  # noqa: ANN001
    """Values of the `wanted` response tokens (all N when None) in the plain `[B, R]`
    layout, 0 elsewhere."""
    if wanted is None:
        return layout.scatter(values)
    return layout.scatter(values.new_zeros(wanted.shape).masked_scatter(wanted, values))


def _keep(layout, values: torch.Tensor, wanted: torch.Tensor | None) -> torch.Tensor:  # noqa: ANN001
    """All N tokens' values in the plain layout, with the unwanted ones 0."""
    if wanted is None:
        return layout.scatter(values)
    return layout.scatter(values.masked_fill(~wanted, 0.0))


def shared_prefix_values(model, inputs: dict[str, torch.Tensor]) -> torch.Tensor:  # noqa: ANN001
    """A value model's V(s_t) for each response token t (read at the position before it),
    `[B, R]` with 0 past a row's end, computed on the shared-prefix layout."""
    layout, mask = _layout(model, inputs)
    out = model(input_ids=layout.input_ids, attention_mask=mask, position_ids=layout.position_ids)
    return layout.scatter(layout.pick(out.logits[..., 0]))

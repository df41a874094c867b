"""Routing replay in the trainer's forwards (`algorithm.router_replay`), over a batch's rows.

An MoE sampler's record travels with the batch as `routed_experts` (`[B, P+R, layers, k]`,
laid out like `input_ids`; `data/batch_keys.py`), through padding, micro-batching and the
shared-prefix layout. Every forward that scores the batch's rows (old log-probs, the
reference, the training forward and its activation-checkpointing recompute) runs inside
`batch_routing`, which by the run's mode:

- `R3`: replays the sampler's record;
- `R2`: replays `old_routed_experts`, the trainer's own record of the old policy's forward
  (`record_old_routing`), in the update's later forwards;
- `off`: replays nothing.

Whatever the mode, it counts how often the trainer's own routers pick the sampler's experts
(`moe/routing_agreement`). Models without MoE layers pass through untouched.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from torch import nn

from rollcli.data.batch_keys import OLD_ROUTED_EXPERTS, ROUTED_EXPERTS
from rollcli.models.moe_routing import (
    RoutingState,
    replay_refusal,
    routed,
    routing_state,
    take_recorded,
)
from rollcli.models.replay_modes import RouterReplay

ROUTING_KEYS = (ROUTED_EXPERTS, OLD_ROUTED_EXPERTS)


def set_router_replay(model: nn.Module, mode: RouterReplay) -> None:
    """The replay every later forward of `model` does; `off` is accepted for any model,
    `R2`/`R3` only for an MoE model of a known router (one line otherwise)."""
    if mode == "off":
        return
    refusal = replay_refusal(model)
    if refusal is not None:
        raise ValueError(f"algorithm.router_replay={mode}: {refusal}; set it to off")
    state = routing_state(model)
    assert state is not None  # replay_refusal found the routers
    state.mode = mode


@contextmanager
def batch_routing(
    model: nn.Module, tensors: Mapping[str, torch.Tensor]
) -> Iterator[RoutingState | None]:
    """The forwards inside over `tensors`' rows (its `attention_mask` marks the real tokens)
    replay what the run's mode says and compare with the sampler's record; inside
    `recorded_forwards` they also record their own choices."""
    state = routing_state(model)
    if state is None:
        yield None
        return
    sampler = tensors.get(ROUTED_EXPERTS)
    replay = {"R3": sampler, "R2": tensors.get(OLD_ROUTED_EXPERTS)}.get(state.mode)
    with routed(
        model,
        replay,
        compare=sampler,
        valid=tensors["attention_mask"],
        record=state.record_batches,
    ) as s:
        yield s


class RoutingRecord:
    """What `recorded_forwards` hands out: the last forward's choices, by its input shape."""

    def __init__(self, state: RoutingState) -> None:
        self.state = state

    def routing(self, shape: torch.Size) -> torch.Tensor:
        """`[rows, columns, layers, k]` for a forward over `shape` input ids."""
        flat = take_recorded(self.state)
        return flat.view(*shape, self.state.layers, flat.shape[-1])


@contextmanager
def recorded_forwards(model: nn.Module) -> Iterator[RoutingRecord]:
    """The batch forwards inside record the experts they pick (R2's old policy)."""
    state = routing_state(model)
    if state is None:
        raise ValueError("algorithm.router_replay=R2 records an MoE model's routing: this has none")
    state.record_batches = True
    try:
        yield RoutingRecord(state)
    finally:
        state.record_batches = False


def routing_inputs(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The routing records among `tensors` (none for a dense model's batch)."""
    return {k: tensors[k] for k in ROUTING_KEYS if k in tensors}

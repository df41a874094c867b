"""Which experts an MoE model's routers pick, recorded, replayed, compared and perturbed.

An MoE layer's router scores every expert for every token and the layer runs the top k. The
rollout engine and the trainer compute those scores with different kernels, batch layouts
and precisions, so for the same token they can pick different experts: the trainer's
log-probs of the sampled tokens then drift from the sampler's and importance ratios blow up.
Routing replay makes the trainer run the experts the rollout picked (R3, the engine's
record) or that the old policy picked (R2, the trainer's own first forward).

Each router of a model gets one forward hook (`routing_state(model)` installs them once,
for any wrapper: peft, FSDP2, DeepSpeed). Whatever the hook does is set on the model's
`RoutingState` for the forwards that follow:

- `record`: keep each layer's chosen top-k ids, read back with `take_recorded` as
  `[N, layers, k]` for the forward's N = rows x columns tokens (row-major, as the router
  sees them).
- `routing`: a `[N, layers, k]` replay of the same layout, `UNSET` (-1) where a token has
  none (it keeps its own choice): the hook swaps the router's choice for it.
- `compare`: a record of the same layout (the sampler's): the hook counts how often the
  router's own top-k set equals it (`moe/routing_agreement`).
- `noise`: perturb the choice (`ROLL_INJECT_FAULT=router-noise@generate:N`), as kernel and
  precision differences do: gaussian noise of `noise` times each token's logit spread is
  added to the logits that choose the top k only.

The gate weights at the experts a replay (or the noise) chose follow the model's own rule
from the router's unperturbed logits: softmax over all experts, taken at the chosen ids,
renormalised over them where the model renormalises its top k (Mixtral always; Qwen2-MoE
and Qwen3-MoE with `norm_topk_prob`), so the router still gets its gradient. Only routers of
that softmax-top-k rule are known (`SOFTMAX_TOPK_ROUTERS`); a model with another kind is
refused for replay in one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

UNSET = -1  # a token with no recorded choice: the router keeps its own
ROUTING_DTYPE = torch.int16  # expert ids; up to 32,767 experts, 2 bytes per id
SOFTMAX_TOPK_ROUTERS = ("Qwen3MoeTopKRouter", "Qwen2MoeTopKRouter", "MixtralTopKRouter")


def moe_routers(model: nn.Module) -> list[nn.Module]:
    """The model's top-k router modules, in layer order ([] for a dense model)."""
    return [m for m in model.modules() if type(m).__name__.endswith("TopKRouter")]


def replay_refusal(model: nn.Module) -> str | None:
    """Why routing replay cannot run on `model`, or None where it can."""
    routers = moe_routers(model)
    if not routers:
        return "the model has no MoE layers (router_replay applies to MoE models only)"
    unknown = sorted({type(r).__name__ for r in routers} - set(SOFTMAX_TOPK_ROUTERS))
    if unknown:
        return f"its routers {unknown} are not softmax top-k routers roll can replay"
    return None


@dataclass
class RoutingStats:
    """Counts since the last `take_stats`, over the tokens a forward marks valid."""

    agree: int = 0  # token x layer whose own top-k set equals the replayed one
    compared: int = 0  # token x layer with a replayed set
    load: Tensor | None = None  # [layers, experts]: tokens routed to each expert

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.compared:
            out["moe/routing_agreement"] = self.agree / self.compared
        if self.load is not None and self.load.sum() > 0:
            load = self.load.double()
            cv = load.std(dim=1, unbiased=False) / load.mean(dim=1).clamp(min=1e-12)
            out["moe/expert_load_cv"] = float(cv.mean())
        return out


@dataclass
class RoutingState:
    """What the hooks of one model's routers do in the forwards that follow (module
    docstring). `valid`: `[N]` bool, the real tokens of the forward (for the counts)."""

    routers: list[nn.Module]
    mode: str = "off"  # the run's `algorithm.router_replay` (a trainer's forwards)
    record: bool = False
    record_batches: bool = False  # the trainer's batch forwards record (R2's old policy)
    keep_logits: bool = False  # keep each layer's router logits (with their graph): the losses
    logits: list[Tensor | None] = field(default_factory=list)
    routing: Tensor | None = None
    compare: Tensor | None = None
    valid: Tensor | None = None
    noise: float = 0.0
    generator: torch.Generator | None = None
    recorded: list[Tensor | None] = field(default_factory=list)
    stats: RoutingStats = field(default_factory=RoutingStats)

    @property
    def layers(self) -> int:
        return len(self.routers)

    @property
    def top_k(self) -> int:
        return int(getattr(self.routers[0], "top_k"))  # noqa: B009 (an attribute, not a module)

    @property
    def num_experts(self) -> int:
        return int(getattr(self.routers[0], "num_experts"))  # noqa: B009


_STATE_ATTR = "_roll_routing_state"


def routing_state(model: nn.Module) -> RoutingState | None:
    """The model's `RoutingState`, its hooks installed on first use; None for a dense model.
    The state is kept on the routers (every wrapper of the model finds it) and on `model`
    itself (found again without walking its modules)."""
    if _STATE_ATTR in model.__dict__:
        return model.__dict__[_STATE_ATTR]
    routers = moe_routers(model)
    state = getattr(routers[0], _STATE_ATTR, None) if routers else None
    if routers and state is None:
        state = RoutingState(routers, recorded=[None] * len(routers), logits=[None] * len(routers))
        for layer, router in enumerate(routers):
            setattr(router, _STATE_ATTR, state)
            router.register_forward_hook(_hook(state, layer))
    model.__dict__[_STATE_ATTR] = state
    return state


def _in_backward() -> bool:
    """Whether a backward pass is running (activation checkpointing recomputes a forward)."""
    return torch._C._current_graph_task_id() != -1


def _hook(state: RoutingState, layer: int):  # noqa: ANN202
    def hook(router: nn.Module, args: tuple, output: tuple) -> tuple | None:
        logits, scores, ids = output
        counting = not _in_backward()  # a recomputed forward is not counted twice
        chosen = None
        if state.noise:
            chosen = _noisy_choice(logits, state.top_k, state.noise, state.generator)
        if state.compare is not None and counting:
            _count_agreement(state, layer, ids)
        if state.routing is not None:
            replayed = _layer_routing(state.routing, layer, logits)
            has = replayed[:, 0] != UNSET
            chosen = torch.where(has[:, None], replayed, ids if chosen is None else chosen)
        if chosen is not None:
            ids = chosen
            scores = gate_weights(router, logits, ids).to(scores.dtype)
        if state.record:
            state.recorded[layer] = ids.detach().to(ROUTING_DTYPE)
        if state.keep_logits and counting and torch.is_grad_enabled():
            state.logits[layer] = logits
        if counting:
            _count_load(state, layer, ids)
        return (logits, scores, ids) if chosen is not None else None

    return hook


def _layer_routing(routing: Tensor, layer: int, logits: Tensor) -> Tensor:
    if routing.shape[0] != logits.shape[0]:
        raise ValueError(
            f"routing replay: the forward routes {logits.shape[0]} tokens but the record "
            f"holds {routing.shape[0]}; its layout does not match the batch"
        )
    return routing[:, layer].to(device=logits.device, dtype=torch.long)


def _count_agreement(state: RoutingState, layer: int, ids: Tensor) -> None:
    """How many tokens' own top-k set (`ids`) equals the compared record's."""
    theirs = _layer_routing(state.compare, layer, ids)  # type: ignore[arg-type]
    has = theirs[:, 0] != UNSET
    if state.valid is not None:
        has = has & state.valid.to(has.device)
    same = (ids.sort(dim=-1).values == theirs.sort(dim=-1).values).all(dim=-1)
    state.stats.agree += int(same[has].sum())
    state.stats.compared += int(has.sum())


def gate_weights(router: nn.Module, logits: Tensor, ids: Tensor) -> Tensor:
    """The model's gate weights at experts `ids` (`[N, k]`): softmax over all experts (in
    float32) at those ids, renormalised over them where the model renormalises its top k."""
    probs = torch.softmax(logits.float(), dim=-1).gather(-1, ids)
    if getattr(router, "norm_topk_prob", True):  # Mixtral has no flag: it always does
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def _noisy_choice(
    logits: Tensor, k: int, scale: float, generator: torch.Generator | None
) -> Tensor:
    """The top k of the logits plus gaussian noise of `scale` times each token's spread."""
    spread = logits.float().std(dim=-1, keepdim=True)
    noise = torch.randn(logits.shape, generator=generator, device=logits.device)
    return torch.topk(logits.float() + scale * spread * noise, k, dim=-1).indices


def _count_load(state: RoutingState, layer: int, ids: Tensor) -> None:
    stats = state.stats
    if stats.load is None:
        stats.load = torch.zeros(state.layers, state.num_experts, dtype=torch.long)
    if state.valid is not None:
        ids = ids[state.valid.to(ids.device)]
    stats.load[layer] += torch.bincount(ids.flatten().cpu(), minlength=state.num_experts)


@contextmanager
def routed(
    model: nn.Module,
    routing: Tensor | None = None,
    *,
    compare: Tensor | None = None,
    valid: Tensor | None = None,
    record: bool = False,
) -> Iterator[RoutingState | None]:
    """The forwards inside replay `routing` and count how often the routers' own choice
    equals `compare` (each `[rows, columns, layers, k]` or flattened to `[N, layers, k]`;
    None: no replay, no count), over the `valid` tokens (`[rows, columns]`, e.g. the
    attention mask; None: all), and record their choices where `record`. The replay stays
    set after the block, so the forward a backward pass recomputes (activation
    checkpointing) replays the same; the next `routed` replaces it. Nothing happens for a
    dense model."""
    state = routing_state(model)
    if state is None:
        yield None
        return
    state.routing = _flat(routing, state.layers)
    state.compare = _flat(compare, state.layers)
    state.valid = None if valid is None else valid.reshape(-1).bool()
    state.record = record
    try:
        yield state
    finally:
        state.record = False


def _flat(routing: Tensor | None, layers: int) -> Tensor | None:
    return None if routing is None else routing.reshape(-1, layers, routing.shape[-1])


def take_recorded(state: RoutingState) -> Tensor:
    """The last forward's recorded choices, `[N, layers, k]` (`ROUTING_DTYPE`, on the CPU)."""
    if any(r is None for r in state.recorded):
        raise RuntimeError("no routing was recorded: run a forward inside routed(record=True)")
    out = torch.stack([r.cpu() for r in state.recorded], dim=1)  # type: ignore[union-attr]
    state.recorded = [None] * state.layers
    return out


def take_stats(model: nn.Module) -> dict[str, float]:
    """The routing metrics since the last call (`moe/routing_agreement`,
    `moe/expert_load_cv`); {} for a dense model."""
    state = routing_state(model)
    if state is None:
        return {}
    metrics = state.stats.metrics()
    state.stats = RoutingStats()
    return metrics


def unset_routing(tokens: int, layers: int, k: int) -> Tensor:
    """`[tokens, layers, k]` of `UNSET`: no recorded choice."""
    return torch.full((tokens, layers, k), UNSET, dtype=ROUTING_DTYPE)


def unset_like(routing: Tensor, tokens: int) -> Tensor:
    """`tokens` rows of `UNSET` shaped like `routing`'s (`[tokens, layers, k]`)."""
    return unset_routing(tokens, routing.shape[1], routing.shape[2])


def recording(model: nn.Module) -> RoutingState | None:
    """Make every forward of `model` record its routing (an engine's own model: the record
    is the rollout's, R3's); the state, or None for a dense model."""
    state = routing_state(model)
    if state is not None:
        state.record = True
    return state


def recorded_routing(model: nn.Module, shape: tuple[int, ...]) -> Tensor | None:
    """The last forward's record as `[rows, columns, layers, k]` for its `shape` input ids,
    or None where the model records nothing (dense, or not `recording`)."""
    state = routing_state(model)
    if state is None or not state.record:
        return None
    flat = take_recorded(state)
    return flat.view(*shape, state.layers, flat.shape[-1])


@contextmanager
def kept_router_logits(model: nn.Module) -> Iterator[RoutingState | None]:
    """The training forwards inside keep each layer's router logits for `router_losses`."""
    state = routing_state(model)
    if state is None:
        yield None
        return
    state.keep_logits, state.logits = True, [None] * state.layers
    try:
        yield state
    finally:
        state.keep_logits = False


def router_losses(state: RoutingState) -> tuple[Tensor, Tensor]:
    """`(load balancing, z-loss)` of the logits the last forward kept, over its valid tokens:
    the Switch Transformer's balancing loss (`E * sum_e f_e P_e` over the layers, as
    transformers computes it for its MoE models: `load_balancing_loss_func`) and ST-MoE's
    z-loss, `mean(logsumexp(logits)^2)`."""
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    logits = [x for x in state.logits if x is not None]
    state.logits = [None] * state.layers
    if not logits:
        raise RuntimeError("no router logits were kept: run the forward in kept_router_logits")
    valid = state.valid
    mask = None if valid is None else valid.view(1, -1).to(logits[0].device)
    balance = load_balancing_loss_func(
        tuple(logits),  # type: ignore[arg-type]  # one per layer, as the model passes them
        state.num_experts,
        state.top_k,
        mask,
    )
    assert isinstance(balance, Tensor)  # 0 only without logits, refused above
    z = torch.stack([torch.logsumexp(x.float(), dim=-1).square() for x in logits])
    if valid is not None:
        z = z[:, valid.to(z.device)]
    return balance, z.mean()

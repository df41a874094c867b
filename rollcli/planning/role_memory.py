"""Memory of one rank of one role: the formulas of `memory.py` applied to a RoleRequest."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from rollcli.config.strategy_spec import ENGINES, STRATEGIES
from rollcli.models.registry import ModelSpec, param_count
from rollcli.models.spec import decoder_linear_params
from rollcli.planning.devices import GiB
from rollcli.planning.inference_memory import (
    hf_engine_memory,
    inference_memory,
    kv_cache_bytes_per_token,
)
from rollcli.planning.memory import (
    AUTOCAST_WEIGHT_COPY_BYTES,
    BF16_COPY_BYTES,
    CPU_ALLOCATOR_SLACK,
    CPU_PROCESS_BYTES,
    FSDP2_LOGITS_BYTES,
    FSDP2_OFFLOAD_GPU_GRAD_BYTES,
    INT8_COPY_BYTES,
    MemoryBreakdown,
    activation_bytes,
    chunked_head_bytes,
    forward_activation_bytes,
    model_state_bytes,
    packed_mask_bytes,
    weight_bytes,
)
from rollcli.planning.request import FORWARD_ROLES, INFER_ROLES, TRAIN_ROLES, RoleRequest


@dataclass(frozen=True)
class RoleMemory:
    """Per-rank bytes of a role.

    active: while the role computes. idle: what stays on the device while a colocated
    neighbour computes. problems: reasons it fails whatever its neighbours do.
    """

    role: str
    active: MemoryBreakdown
    idle: MemoryBreakdown
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    host_bytes: int = 0  # states this rank keeps in host memory (offload, idle offload)


def effective_zero_stage(req: RoleRequest) -> int:
    """hf trains plain data parallel (stage 0); megatron's distributed optimizer is stage 1;
    fsdp2 (`fully_shard`) shards weights, gradients and optimizer states (stage 3): the
    strategy's row (`config/strategy_spec.py`)."""
    row = STRATEGIES[req.resolved_strategy]
    if row.fully_sharded:
        return 3
    if row.zero:  # DeepSpeed: the recipe's stage
        return req.zero_stage
    return min(req.zero_stage, max(row.zero_stages))


def estimate_role(
    req: RoleRequest,
    model: ModelSpec,
    *,
    ranks: int,
    capacity_bytes: int | None,
    on_cpu: bool,
    colocated: bool,
) -> RoleMemory:
    """Bytes one rank of `req` uses; `ranks` is how many devices the role spans."""
    model = req.model or model
    offloaded = 0
    problems: tuple[str, ...]
    notes: tuple[str, ...]
    if req.role in TRAIN_ROLES:
        active, problems, notes = _train(req, model, ranks, on_cpu), (), ()
        resident = MemoryBreakdown(active.weights, active.grads, active.optimizer)
        unsharded = _train(
            replace(req, offload_optimizer=False, offload_params=False), model, ranks, on_cpu
        )
        offloaded = unsharded.total - active.total
        active = active + _fsdp2_offload_grads(req, model, ranks)  # transient: not resident
    elif req.role in INFER_ROLES:
        active, problems, notes = _infer(req, model, capacity_bytes, on_cpu)
        resident = active
    elif req.role in FORWARD_ROLES:
        active = _forward(req, model, on_cpu)
        resident, problems, notes = MemoryBreakdown(weights=active.weights), (), ()
    else:
        active = resident = MemoryBreakdown()
        problems, notes = (), ()
    sleeps = colocated and leaves_gpu_when_idle(req)
    idle = MemoryBreakdown() if sleeps else resident
    # A sleeping inference engine keeps its weights on the host and drops its KV cache.
    host = offloaded + ((resident.total - resident.kv_cache) if sleeps else 0)
    return RoleMemory(req.role, active, idle, problems, notes, host)


def rows_per_forward(req: RoleRequest, *, budget_applies: bool = True) -> int:
    """The samples a worker puts through one forward: `micro_batch`, fewer where
    `micro_batch_tokens` of padded tokens hold fewer (the workers' `micro_batch_tokens`
    split; at least one).

    >>> rows_per_forward(RoleRequest("actor_train", "cpu", micro_batch=16, seq_len=288,
    ...                              micro_batch_tokens=4096))
    14
    >>> rows_per_forward(RoleRequest("actor_train", "cpu", micro_batch=16, seq_len=288,
    ...                  prompt_len=256, micro_batch_tokens=1024, shared_prefix=8))
    16
    """
    budget = req.micro_batch_tokens if budget_applies else None
    rows = req.micro_batch
    while budget is not None and rows > 1 and tokens_per_forward(req, rows) > budget:
        rows -= 1
    return rows


def tokens_per_forward(req: RoleRequest, rows: int) -> int:
    """Tokens of a forward over `rows` samples: rows · seq_len, or with the shared-prefix
    layout ⌈rows / k⌉ packed rows of the prompt and k responses each."""
    k = req.shared_prefix
    if k <= 1:
        return rows * req.seq_len
    return -(-rows // k) * req.prompt_len + rows * (req.seq_len - req.prompt_len)


def with_process_runtime(memory: RoleMemory) -> RoleMemory:
    """`memory` plus a host process's own bytes (`CPU_PROCESS_BYTES`), active and idle: in
    a CPU run every role's rank is a process of its own, a model in it or not."""
    own = MemoryBreakdown(runtime=CPU_PROCESS_BYTES)
    return replace(memory, active=memory.active + own, idle=memory.idle + own)


@dataclass(frozen=True)
class ForwardShape:
    """The largest forward a worker runs: its tokens, the response tokens the head scores,
    and the elements of its packed rows' attention masks (Σ L², shared-prefix layout)."""

    tokens: int
    scored: int
    mask_elements: int = 0


def forward_shape(req: RoleRequest, *, budget_applies: bool = True) -> ForwardShape:
    """`rows_per_forward` samples at the longest, or, where the budget splits a micro-batch
    of the longest samples, as many tokens as the budget holds: samples shorter than the
    longest fill it with more of them (a webshop micro-batch of 4 conversations of up to
    2,560 tokens is one conversation at the longest, two of 2,048).

    >>> forward_shape(RoleRequest("actor_train", "cpu", micro_batch=4, seq_len=2560,
    ...               prompt_len=256, micro_batch_tokens=4096, shared_prefix=4)).tokens
    4096
    """
    rows = rows_per_forward(req, budget_applies=budget_applies)
    tokens = tokens_per_forward(req, rows)
    scored = rows * (req.seq_len - req.prompt_len or req.seq_len)  # sft: every position
    k = req.shared_prefix
    width = req.prompt_len + min(rows, k) * (req.seq_len - req.prompt_len)
    masks = -(-rows // k) * width * width if k > 1 else 0
    budget = req.micro_batch_tokens if budget_applies else None
    filled = min(tokens_per_forward(req, req.micro_batch), budget or 0)
    if filled > tokens:  # the extra tokens may all be scored, in one packed row
        scored += filled - tokens
        tokens = filled
        masks = filled * filled if k > 1 else 0
    return ForwardShape(tokens, scored, masks)


def _cpu_head(
    req: RoleRequest, model: ModelSpec, shape: ForwardShape, on_cpu: bool, train: bool
) -> int | None:
    """The chunked head's bytes on the CPU (its logits fp32 whatever the weights), else
    None (whole logits counted)."""
    if not (on_cpu and req.chunked_head):
        return None
    return chunked_head_bytes(model, scored_tokens=shape.scored, train=train)


def _data_parallel(req: RoleRequest, ranks: int) -> int:
    """The data-parallel ranks of a role spanning `ranks` devices in groups of tp · pp."""
    return max(1, ranks // (req.tp * req.pp))


def _train(req: RoleRequest, model: ModelSpec, ranks: int, on_cpu: bool) -> MemoryBreakdown:
    dp = _data_parallel(req, ranks)
    # The budget splits rows by length, which only the hf strategy or one rank allows
    # (`data_parallel.token_budget`).
    row = STRATEGIES[req.resolved_strategy]
    shape = forward_shape(req, budget_applies=row.rank_token_budget or dp == 1)
    acts = activation_bytes(
        model,
        micro_batch=1,
        seq_len=shape.tokens,
        grad_checkpointing=req.grad_checkpointing,
        tp=req.tp,
        dtype_bytes=req.param_bytes,
        head=_cpu_head(req, model, shape, on_cpu, train=True),
        counted=on_cpu,  # the saved tensors counted on the CPU (memory.layer_activation_bytes)
    )
    if on_cpu:  # freed blocks glibc keeps resident during the pass
        acts = int(acts * (1 + CPU_ALLOCATOR_SLACK))
    acts += packed_mask_bytes(shape.mask_elements, req.param_bytes)
    fsdp2 = row.fully_sharded
    if fsdp2 and not on_cpu:  # whole-response logits, not the one fp32 copy counted above
        extra = FSDP2_LOGITS_BYTES - 4
        acts += math.ceil(extra * shape.scored * model.vocab_size / req.tp)
    if req.lora_params:  # frozen base weights; the adapters train (stage 0, replicated)
        frozen = weight_bytes(param_count(model), tp=req.tp, pp=req.pp, param_bytes=req.param_bytes)
        adapters = model_state_bytes(
            req.lora_params, dp=1, zero_stage=0, tp=req.tp, pp=req.pp, param_bytes=req.param_bytes
        )
        if fsdp2:  # fully_shard splits the frozen base and the adapters alike
            frozen = round(frozen / dp)
            adapters = model_state_bytes(
                req.lora_params, dp=dp, zero_stage=3, param_bytes=4, **_fsdp2_offload(req)
            )
        return adapters + MemoryBreakdown(weights=frozen, activations=acts)
    if fsdp2:  # fp32 shards are the master weights; gradients reach them in fp32
        states = model_state_bytes(
            param_count(model), dp=dp, zero_stage=3, param_bytes=4, **_fsdp2_offload(req)
        )
        return states + MemoryBreakdown(activations=acts)
    states = model_state_bytes(
        param_count(model),
        dp=dp,
        zero_stage=effective_zero_stage(req),
        tp=req.tp,
        pp=req.pp,
        param_bytes=req.param_bytes,
        offload_optimizer=req.offload_optimizer,
        offload_params=req.offload_params,
        fp32_grads=row.fp32_grads,
    )
    return states + MemoryBreakdown(activations=acts) + _autocast_copies(req, model)


def _autocast_copies(req: RoleRequest, model: ModelSpec) -> MemoryBreakdown:
    """The hf strategy's bf16 copies of its fp32 linear weights in autocast's cast cache
    (`memory.AUTOCAST_WEIGHT_COPY_BYTES`); DeepSpeed's bf16 mode computes with bf16 weights
    and casts nothing."""
    if STRATEGIES[req.resolved_strategy].owns_bf16 or req.param_bytes >= 4:
        return MemoryBreakdown()
    copies = AUTOCAST_WEIGHT_COPY_BYTES * decoder_linear_params(model) / (req.tp * req.pp)
    return MemoryBreakdown(weights=round(copies))


def _fsdp2_offload(req: RoleRequest) -> dict[str, bool]:
    """FSDP2's CPU offload (`offload_params`) moves weights, gradients and optimizer
    states to host memory together."""
    return {"offload_optimizer": req.offload_params, "offload_params": req.offload_params}


def _fsdp2_offload_grads(req: RoleRequest, model: ModelSpec, ranks: int) -> MemoryBreakdown:
    """What FSDP2's CPU offload was measured to hold on the GPU during an update beyond its
    activations, counted as every trainable parameter's fp32 gradient shard on its way to
    host memory (`memory.FSDP2_OFFLOAD_GPU_GRAD_BYTES`): a peak of the update, not a
    resident state, so host memory still keeps all the states."""
    if not (req.offload_params and STRATEGIES[req.resolved_strategy].fully_sharded):
        return MemoryBreakdown()
    trainable = req.lora_params or param_count(model)
    dp = _data_parallel(req, ranks)
    return MemoryBreakdown(grads=round(FSDP2_OFFLOAD_GPU_GRAD_BYTES * trainable / dp))


def _forward(req: RoleRequest, model: ModelSpec, on_cpu: bool = False) -> MemoryBreakdown:
    weights = weight_bytes(param_count(model), tp=req.tp, pp=req.pp, param_bytes=req.param_bytes)
    shape = forward_shape(req)
    acts = forward_activation_bytes(
        model,
        micro_batch=1,
        seq_len=shape.tokens,
        tp=req.tp,
        dtype_bytes=req.param_bytes,
        head=_cpu_head(req, model, shape, on_cpu, train=False),
    )
    return MemoryBreakdown(
        weights=weights, activations=acts + packed_mask_bytes(shape.mask_elements, req.param_bytes)
    )


def _infer(
    req: RoleRequest, model: ModelSpec, capacity_bytes: int | None, on_cpu: bool
) -> tuple[MemoryBreakdown, tuple[str, ...], tuple[str, ...]]:
    if ENGINES[req.resolved_strategy].kv_pool is None:  # hf: what the batch needs
        active = hf_engine_memory(
            model,
            max_num_seqs=req.max_num_seqs,
            seq_len=req.seq_len,
            prompt_len=req.prompt_len,
            tp=req.tp,
            pp=req.pp,
            dtype_bytes=req.param_bytes,
        )
        # the episodes' KV kept between turns (agentic), a budget the engine holds to
        active = active + MemoryBreakdown(kv_cache=req.session_bytes)
        per_param = INT8_COPY_BYTES * req.int8_copies + BF16_COPY_BYTES * req.bf16_copies
        if per_param:  # beside the fp32 weights (strategies/int8_linears.py, bf16_linears.py)
            copies = math.ceil(per_param * param_count(model) / (req.tp * req.pp))
            active = active + MemoryBreakdown(weights=copies)
        return active, (), ()
    if on_cpu or capacity_bytes is None:
        # No pre-reserved pool: the cache grows to what the batch needs.
        per_token = kv_cache_bytes_per_token(
            model, tp=req.tp, pp=req.pp, dtype_bytes=req.param_bytes
        )
        forward = _forward(req, model)
        kv = req.max_num_seqs * req.seq_len * per_token
        return forward + MemoryBreakdown(kv_cache=kv), (), ()
    inf = inference_memory(
        model,
        capacity_bytes=capacity_bytes,
        gpu_memory_utilization=req.gpu_memory_utilization,
        max_num_seqs=req.max_num_seqs,
        max_len=req.seq_len,
        tp=req.tp,
        pp=req.pp,
        dtype_bytes=req.param_bytes,
    )
    budget = req.gpu_memory_utilization * capacity_bytes
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    if inf.kv_reserved < inf.kv_per_sequence:
        problems = (
            f"{req.role}: weights take {inf.weights / GiB:.1f} GiB of the {budget / GiB:.1f} GiB "
            f"the engine may use (gpu_memory_utilization {req.gpu_memory_utilization}), leaving "
            f"{inf.kv_reserved / GiB:.1f} GiB of KV cache, less than one {req.seq_len}-token "
            f"sequence needs ({inf.kv_per_sequence / GiB:.2f} GiB)",
        )
    elif inf.kv_reserved < inf.kv_needed:
        notes = (
            f"{req.role}: the KV cache ({inf.kv_reserved / GiB:.1f} GiB) holds "
            f"{inf.sequences_in_cache} of max_num_seqs={req.max_num_seqs} sequences of "
            f"{req.seq_len} tokens ({inf.kv_needed / GiB:.1f} GiB); the engine runs fewer at "
            "once",
        )
    active = MemoryBreakdown(weights=inf.weights, kv_cache=inf.kv_reserved)
    return active, problems, notes


def leaves_gpu_when_idle(req: RoleRequest) -> bool:
    """Whether an idle colocated rank of `req` frees its GPU: only actor_infer's vllm or
    sglang engine does (its sleep mode; `offload_when_idle`). Training and forward roles,
    and the hf engine, keep their states on the GPU in this build, and are planned so.

    >>> leaves_gpu_when_idle(RoleRequest("actor_infer", "0-7", strategy="vllm"))
    True
    >>> leaves_gpu_when_idle(RoleRequest("actor_train", "0-7", offload_when_idle=True))
    False
    """
    return (
        req.offload_when_idle and req.role in INFER_ROLES and ENGINES[req.resolved_strategy].sleeps
    )


def infer_sleeps_while_training(placements: dict[str, Any], offload_when_idle: bool) -> bool:
    """Whether actor_infer's engine should sleep while actor_train computes: a GPU plan puts
    them on a shared GPU and actor_infer may leave it when idle (the planner then counts no
    idle memory for it, see `role_memory`).

    >>> infer_sleeps_while_training({"actor_infer": [0], "actor_train": [0, 1]}, True)
    True
    >>> infer_sleeps_while_training({"actor_infer": [2], "actor_train": [0, 1]}, True)
    False
    >>> infer_sleeps_while_training({"actor_infer": "cpu", "actor_train": "cpu"}, True)
    False
    """
    infer, train = placements.get("actor_infer"), placements.get("actor_train")
    if not isinstance(infer, list) or not isinstance(train, list):
        return False  # a CPU run: nothing to free
    return offload_when_idle and bool(set(infer) & set(train))

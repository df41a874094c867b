"""The kinds of steps on the advice ladder (`advice.py`): each proposes one knob to change
for the roles that do not fit, and names the recipe key that sets it (`RECIPE_KEYS`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rollcli.config.parallel import runs_parallel
from rollcli.config.roles import ACTOR_TRAIN, REFERENCE
from rollcli.config.strategy_spec import ENGINES, STRATEGIES
from rollcli.planning.devices import PlanError, format_indices
from rollcli.planning.lora_params import lora_param_count
from rollcli.planning.request import INFER_ROLES, TRAIN_ROLES, PlanInput, RoleRequest
from rollcli.planning.role_memory import leaves_gpu_when_idle
from rollcli.planning.sharing import MAX_GPUS

if TYPE_CHECKING:
    from rollcli.planning.planner import Plan

# Field of RoleRequest -> the recipe key (an override `key=value`) that sets it; a role's
# placement and parallel layout live under `devices.<role>` (config/devices_section.py).
RECIPE_KEYS: dict[str, str] = {
    "strategy": "{role}.strategy",
    "zero_stage": "devices.{role}.zero_stage",
    "offload_optimizer": "devices.{role}.offload_optimizer",
    "offload_params": "devices.{role}.offload_params",
    "grad_checkpointing": "{role}.grad_checkpointing",
    "micro_batch": "{role}.micro_batch",
    "tp": "devices.{role}.tp",
    "offload_when_idle": "devices.{role}.offload_when_idle",
    "gpu_memory_utilization": "devices.{role}.gpu_memory_utilization",
    "max_num_seqs": "devices.{role}.max_num_seqs",
    "device_mapping": "devices.{role}.device_mapping",
}


# Knobs that other recipe sections own, per role.
ROLE_KEYS: dict[tuple[str, str], str] = {
    ("strategy", "actor_train"): "train.strategy",
    ("strategy", "actor_infer"): "rollout.engine",
    ("micro_batch", "actor_train"): "train.micro_batch_size",
    ("micro_batch", "reference"): "train.micro_batch_size",
    ("micro_batch", "critic"): "critic.micro_batch_size",
    ("grad_checkpointing", "actor_train"): "train.gradient_checkpointing",
}


def recipe_key(field: str, role: str) -> str:
    """The recipe key that sets `field` of `role`.

    >>> recipe_key("zero_stage", "actor_train"), recipe_key("micro_batch", "actor_train")
    ('devices.actor_train.zero_stage', 'train.micro_batch_size')
    """
    return ROLE_KEYS.get((field, role)) or RECIPE_KEYS[field].format(role=role)


Assess = Callable[[PlanInput], "Plan"]


Step = tuple[str, PlanInput]  # (what to do, the request after doing it)


StepKind = Callable[[PlanInput, "Plan", Assess], Iterator[Step]]


def _failing(plan: Plan) -> set[str]:
    roles = {r for d in plan.judged if not d.fits for r in d.roles}
    return roles | {r for r, m in plan.role_memory.items() if m.problems}


def _key(field: str, role: str, value: object) -> str:
    if isinstance(value, bool):
        value = str(value).lower()
    return f"`{recipe_key(field, role)}={value}`"


def _with(inp: PlanInput, role: str, **changes: Any) -> PlanInput:
    roles = [replace(r, **changes) if r.role == role else r for r in inp.roles]
    return replace(inp, roles=roles)


def _trainers(inp: PlanInput, plan: Plan) -> Iterator[RoleRequest]:
    failing = _failing(plan)
    return (r for r in inp.roles if r.role in TRAIN_ROLES and r.role in failing)


def _fsdp2(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    """actor_train on plain `hf` over several GPUs: shard its states with FSDP2 (torch's
    own, nothing to install): what `train.strategy: auto` tries before DeepSpeed."""
    for req in _trainers(inp, plan):
        where = plan.placements[req.role]
        dp = 1 if where == "cpu" else len(where) // (req.tp * req.pp)
        replicated = not STRATEGIES[req.resolved_strategy].shards_states  # hf
        if req.role == ACTOR_TRAIN and dp > 1 and replicated:
            text = f"shard model states over {dp} GPUs with FSDP2: " + _key(
                "strategy", req.role, "fsdp2"
            )
            yield text, _with(inp, req.role, strategy="fsdp2")


def _zero(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    for req in _trainers(inp, plan):
        where = plan.placements[req.role]
        dp = 1 if where == "cpu" else len(where) // (req.tp * req.pp)
        row = STRATEGIES[req.resolved_strategy]
        takes_zero = row.zero or not row.shards_states  # deepspeed, or hf moved to it
        if dp > 1 and req.zero_stage < 3 and takes_zero:
            text = f"shard model states over {dp} GPUs with ZeRO-3: " + _key(
                "zero_stage", req.role, 3
            )
            if not row.zero:
                text += " and " + _key("strategy", req.role, "deepspeed")
            yield text, _with(inp, req.role, strategy="deepspeed", zero_stage=3)


LORA_RANK = 16  # what the advice suggests; train.lora's other keys keep their defaults


LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")  # train.lora.target_modules' default


def _lora(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    """actor_train with LoRA: frozen weights without gradients or Adam states; a reference
    that is a copy of the policy becomes the policy with its adapters off."""
    for req in _trainers(inp, plan):
        replicated = not STRATEGIES[req.resolved_strategy].shards_states  # hf
        if req.role != ACTOR_TRAIN or req.lora_params or not replicated:
            continue
        params = lora_param_count(inp.model, r=LORA_RANK, target_modules=LORA_TARGETS)
        drop = any(r.role == REFERENCE for r in inp.roles)  # a copy of the policy
        roles = [
            replace(r, lora_params=params) if r.role == req.role else r
            for r in inp.roles
            if not (drop and r.role == REFERENCE)
        ]
        text = (
            f"train LoRA adapters ({params / 1e6:.1f}M parameters), not every weight: "
            f"`train.lora.r={LORA_RANK}`"
            + ("; the reference is then the policy with its adapters off" if drop else "")
        )
        yield text, replace(inp, roles=roles)


def _offload(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    for req in _trainers(inp, plan):
        row = STRATEGIES[req.resolved_strategy]
        if (row.shards_states and not row.offloads) or plan.placements[req.role] == "cpu":
            continue  # megatron: no CPU offload here
        if row.fully_sharded:  # fsdp2: its CPU offload moves every state at once
            if not req.offload_params:
                text = "offload weights, gradients and Adam states to host memory: " + _key(
                    "offload_params", req.role, True
                )
                yield text, _with(inp, req.role, offload_params=True)
            continue
        if req.role == ACTOR_TRAIN and not row.shards_states and not req.lora_params:
            text = "offload weights, gradients and Adam states to host memory with FSDP2: "
            text += _key("strategy", req.role, "fsdp2") + " and "
            text += _key("offload_params", req.role, True)
            yield text, _with(inp, req.role, strategy="fsdp2", offload_params=True)
        if not req.offload_optimizer:
            stage = max(req.zero_stage, 1)
            text = "offload Adam states to host memory: " + _key(
                "offload_optimizer", req.role, True
            )
            if stage != req.zero_stage or not row.zero:
                text += " (with " + _key("zero_stage", req.role, stage) + ")"
            changes = {"offload_optimizer": True, "zero_stage": stage, "strategy": "deepspeed"}
            yield text, _with(inp, req.role, **changes)
        elif not req.offload_params:
            text = "offload parameters too: " + _key("offload_params", req.role, True)
            if req.zero_stage != 3:
                text += " (with " + _key("zero_stage", req.role, 3) + ")"
            yield text, _with(inp, req.role, offload_params=True, zero_stage=3)


def _activations(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    for req in _trainers(inp, plan):
        if not req.grad_checkpointing:
            text = "recompute activations in backward: " + _key(
                "grad_checkpointing", req.role, True
            )
            yield text, _with(inp, req.role, grad_checkpointing=True)
        for mb in _halvings(req.micro_batch):
            candidate = _with(inp, req.role, micro_batch=mb)
            if mb == 1 or _fits(assess, candidate):
                text = "smaller micro-batch: " + _key("micro_batch", req.role, mb)
                yield text, candidate
                break


def _inference(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    failing = _failing(plan)
    for req in inp.roles:
        if req.role not in failing or plan.placements[req.role] == "cpu":
            continue
        # only an engine that runs tp (vllm, sglang; not hf): config/parallel.py
        if (
            req.role in INFER_ROLES
            and req.tp * 2 <= 8
            and runs_parallel(req.resolved_strategy, "tp")
        ):
            text = "split the inference engine over more GPUs: " + _key("tp", req.role, req.tp * 2)
            yield text, _with(inp, req.role, tp=req.tp * 2)
    for req in inp.roles:
        colocated = any(req.role in d.roles and len(d.roles) > 1 for d in plan.judged)
        if colocated and not leaves_gpu_when_idle(replace(req, offload_when_idle=True)):
            continue  # this role cannot leave its GPU when idle (see leaves_gpu_when_idle)
        if colocated and not req.offload_when_idle:
            text = "offload this role while its GPU neighbours compute: " + _key(
                "offload_when_idle", req.role, True
            )
            yield text, _with(inp, req.role, offload_when_idle=True)
    for req in inp.roles:
        if req.role not in INFER_ROLES or req.role not in failing:
            continue
        util = round(req.gpu_memory_utilization - 0.05, 2)
        while util >= 0.3:
            candidate = _with(inp, req.role, gpu_memory_utilization=util)
            if _fits(assess, candidate):
                text = "leave room for colocated roles: " + _key(
                    "gpu_memory_utilization", req.role, util
                )
                yield text, candidate
                break
            util = round(util - 0.05, 2)
        if req.max_num_seqs > 1 and ENGINES[req.resolved_strategy].reads_max_num_seqs:
            # one line: the most sequences that fit, else one at a time (not 64, 16, 4, 1)
            seqs = next(
                (
                    n
                    for n in _quarters(req.max_num_seqs)
                    if _fits(assess, _with(inp, req.role, max_num_seqs=n))
                ),
                1,
            )
            text = "fewer sequences at once: " + _key("max_num_seqs", req.role, seqs)
            yield text, _with(inp, req.role, max_num_seqs=seqs)


def _more_gpus(inp: PlanInput, plan: Plan, assess: Assess) -> Iterator[Step]:
    """The fewest GPUs (a power-of-two multiple) that fit, widening every role's mapping
    alike and, where weights alone overflow a GPU, the inference engine's tp."""
    if inp.num_gpus == 0:
        return
    for factor in (2, 4, 8, 16, 32, 64):
        total = inp.num_gpus * factor
        node = max(inp.node_size, min(8, total))
        if total > MAX_GPUS:
            return
        if total % node:
            continue
        for tp_factor in (1, 2, 4, 8):
            roles = [_scaled(r, plan, factor, tp_factor) for r in inp.roles]
            if tp_factor > 1 and all(r.tp == o.tp for r, o in zip(roles, inp.roles, strict=True)):
                break  # no role here splits over tp: a larger tp_factor changes nothing
            candidate = replace(
                inp, num_gpus=total, num_nodes=total // node, gpus_per_node=node, roles=roles
            )
            if not _fits(assess, candidate):
                continue
            flags = f"`--gpus {total}`" + (f" `--nodes {total // node}`" if total > node else "")
            keys = [
                _key("device_mapping", r.role, f"'{r.device_mapping}'")
                for r in roles
                if plan.placements[r.role] != "cpu"
            ]
            keys += [
                _key("tp", new.role, new.tp)
                for old, new in zip(inp.roles, roles, strict=True)
                if new.tp != old.tp
            ]
            yield f"use {total} GPUs: {flags} with " + ", ".join(keys), candidate
            return


def _scaled(req: RoleRequest, plan: Plan, factor: int, tp_factor: int) -> RoleRequest:
    where = plan.placements[req.role]
    if where == "cpu":
        return req
    splits = req.role in INFER_ROLES and runs_parallel(req.resolved_strategy, "tp")
    tp = req.tp * tp_factor if splits else req.tp
    return replace(req, device_mapping=_widen(where, factor), tp=tp)


def _widen(where: list[int], factor: int) -> str:
    """Map GPU g to GPUs g·factor … g·factor + factor − 1, keeping who shares with whom."""
    return format_indices(sorted(g * factor + k for g in where for k in range(factor)))


def _quarters(n: int) -> Iterator[int]:
    """n/4, n/16, ... and finally 1.

    >>> list(_quarters(256)), list(_quarters(32)), list(_quarters(2))
    ([64, 16, 4, 1], [8, 2, 1], [1])
    """
    n //= 4
    while n > 1:
        yield n
        n //= 4
    yield 1


def _halvings(micro_batch: int) -> Iterator[int]:
    mb = micro_batch // 2
    while mb >= 1:
        yield mb
        mb //= 2


def _fits(assess: Assess, inp: PlanInput) -> bool:
    try:
        return assess(inp).fits
    except PlanError:
        return False


# The whole ladder, in the order advice tries it (module docstring).
LADDER: tuple[StepKind, ...] = (_zero, _lora, _offload, _activations, _inference, _more_gpus)


# The steps `train.strategy: auto` takes by itself (planning/auto_strategy.py), cheapest
# first (FSDP2 before DeepSpeed: torch's own, nothing to install): sharding costs a collective per layer, the engine's memory share and a smaller
# micro-batch little, recomputation a third more compute, offload copies every step. Not
# LoRA (it changes what trains) and not more GPUs (they change the machine); tensor
# parallelism is a `devices.actor_infer.tp` step inside `_inference` that auto refuses.
# `_inference` comes again after offload: the memory share that fits may only exist then.
AUTO_LADDER: tuple[StepKind, ...] = (_fsdp2, _zero, _inference, _activations, _offload, _inference)

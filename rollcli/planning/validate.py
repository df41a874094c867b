"""Checks that reject a plan request at any memory size, each naming the fix."""

from __future__ import annotations

from typing import Literal

from rollcli.config.capabilities import train_layout_error
from rollcli.planning.devices import PlanError
from rollcli.planning.request import (
    INFER_ROLES,
    INFER_STRATEGIES,
    TRAIN_ROLES,
    TRAIN_STRATEGIES,
    PlanInput,
    RoleRequest,
)
from rollcli.planning.sharing import MAX_GPUS


def validate_input(inp: PlanInput) -> None:
    """Cluster shape and the role list."""
    if inp.num_gpus < 0:
        raise PlanError(f"num_gpus {inp.num_gpus} is negative; pass --gpus 0 for a CPU run")
    if inp.num_gpus > MAX_GPUS:
        raise PlanError(
            f"num_gpus {inp.num_gpus:,} is more than roll plans for ({MAX_GPUS:,} GPUs); "
            f"plan a part of the cluster, e.g. --gpus {MAX_GPUS}"
        )
    if inp.num_nodes < 1:
        raise PlanError(f"num_nodes {inp.num_nodes} must be at least 1")
    if inp.num_gpus and inp.gpus_per_node and inp.gpus_per_node * inp.num_nodes != inp.num_gpus:
        raise PlanError(
            f"{inp.num_nodes} node(s) × {inp.gpus_per_node} GPUs per node is not "
            f"{inp.num_gpus} GPUs; pass --gpus {inp.gpus_per_node * inp.num_nodes}"
        )
    if inp.num_gpus and not inp.gpus_per_node and inp.num_gpus % inp.num_nodes:
        raise PlanError(
            f"{inp.num_gpus} GPUs do not split evenly over {inp.num_nodes} nodes; "
            "give the same number of GPUs per node"
        )
    if inp.num_gpus and inp.gpu_memory_bytes <= 0:
        raise PlanError(f"gpu_memory_bytes {inp.gpu_memory_bytes} must be positive")
    if not inp.roles:
        raise PlanError("no roles to place; a recipe needs at least actor_train or actor_infer")
    names = [r.role for r in inp.roles]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise PlanError(f"role {dupes[0]!r} is given twice; give each role one device_mapping")


def validate_role(req: RoleRequest, where: list[int] | Literal["cpu"], inp: PlanInput) -> None:
    """One role's numbers, strategy options and parallel layout."""
    role = req.role
    for name in ("tp", "pp", "micro_batch", "seq_len", "max_num_seqs"):
        if getattr(req, name) < 1:
            raise PlanError(f"{role}.{name} is {getattr(req, name)}; it must be at least 1")
    if not 0 < req.gpu_memory_utilization <= 1:
        raise PlanError(
            f"{role}.gpu_memory_utilization is {req.gpu_memory_utilization}; "
            "give a fraction in (0, 1], e.g. 0.6"
        )
    if req.param_bytes not in (2, 4):
        raise PlanError(f"{role}.param_bytes is {req.param_bytes}; use 2 (bf16/fp16) or 4 (fp32)")
    _check_strategy(req)
    if where == "cpu":
        return
    group = req.tp * req.pp
    if len(where) % group:
        raise PlanError(
            f"{role}: tp={req.tp} × pp={req.pp} = {group} does not divide its {len(where)} "
            f"GPU(s); map a multiple of {group} GPUs or change tp/pp"
        )
    heads = inp.model.num_attention_heads
    if heads % req.tp:
        raise PlanError(
            f"{role}.tp={req.tp} does not divide {inp.model.name}'s {heads} attention heads; "
            f"use a tp that divides {heads}"
        )
    if req.pp > inp.model.num_layers:
        raise PlanError(
            f"{role}.pp={req.pp} exceeds {inp.model.name}'s {inp.model.num_layers} layers"
        )


def _check_strategy(req: RoleRequest) -> None:
    role, strategy = req.role, req.resolved_strategy
    if role in TRAIN_ROLES and strategy not in TRAIN_STRATEGIES:
        raise PlanError(f"{role}.strategy {strategy!r} is not one of {', '.join(TRAIN_STRATEGIES)}")
    if role in INFER_ROLES and strategy not in INFER_STRATEGIES:
        raise PlanError(f"{role}.strategy {strategy!r} is not one of {', '.join(INFER_STRATEGIES)}")
    if role not in TRAIN_ROLES:
        return
    if req.zero_stage not in (0, 1, 2, 3):
        raise PlanError(f"{role}.zero_stage is {req.zero_stage}; use 0, 1, 2 or 3")
    error = train_layout_error(
        role, strategy, req.zero_stage, req.offload_optimizer, req.offload_params, req.tp, req.pp
    )
    if error:
        raise PlanError(error)

"""Place roles on devices and judge whether each device's peak memory fits.

Colocated roles time-share a GPU: one role computes at a time (generate, then
reference/reward forward, then train), and a role that is not computing keeps only its
idle footprint there (nothing for an inference engine that sleeps when idle,
`offload_when_idle`: see `roles.leaves_gpu_when_idle`; training and forward roles keep
their states). So, per GPU,

    peak = max over roles r on the GPU of  active(r) + Σ_{q ≠ r} idle(q)

The reported breakdown is the one at that peak phase. On the host (a CPU plan, or roles
mapped to "cpu") processes do not offload: the peak is the sum of every role's active
bytes, plus in a CPU run the driver process's own (`CPU_DRIVER_BYTES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any, Literal

from rollcli.planning.devices import PlanError, format_indices, parse_device_mapping
from rollcli.planning.memory import CPU_DRIVER_BYTES, GPU_PROCESS_HOST_BYTES, MemoryBreakdown
from rollcli.planning.request import (
    FORWARD_ROLES,
    HOST_ROLES,
    INFER_ROLES,
    ROLES,
    TRAIN_ROLES,
    PlanInput,
    RoleRequest,
    default_strategy,
)
from rollcli.planning.role_memory import RoleMemory, estimate_role, with_process_runtime
from rollcli.planning.role_table import Workers
from rollcli.planning.sharing import MAX_GPUS, GpuGroup, group_gpus, spans_nodes
from rollcli.planning.validate import validate_input, validate_role

Placement = list[int] | Literal["cpu"]
_ANY_GPU_COUNT = MAX_GPUS  # for syntax checks of GPU mappings in a CPU run


@dataclass(frozen=True)
class DevicePlan:
    """One GPU (id = global index) or the host (id = "cpu") at its peak phase."""

    id: int | Literal["cpu"]
    roles: list[str]
    memory_bytes: dict[str, int]
    capacity_bytes: int | None
    peak_role: str | None = None  # the role computing at the peak

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.memory_bytes["total"] <= self.capacity_bytes

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "roles": list(self.roles),
            "memory_bytes": dict(self.memory_bytes),
            "capacity_bytes": self.capacity_bytes,
        }


@dataclass(frozen=True)
class Plan:
    """The outcome of `make_plan`.

    mode: "cpu" (no GPUs), "colocated" (some GPU hosts two or more roles), "separate".
    problems: why it does not fit beyond device totals (e.g. no room for KV cache).
    notes: things worth knowing that do not stop the run.
    advice: ordered changes, each with the recipe key to set, when it does not fit.
    """

    mode: Literal["colocated", "separate", "cpu"]
    fits: bool
    # GPUs that host the same roles, with the plan of the first (they peak alike)
    gpu_groups: list[tuple[list[int], DevicePlan]] = field(default_factory=list)
    host: DevicePlan | None = None  # roles on the host (a CPU plan, or mapped to "cpu")
    advice: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    placements: dict[str, Placement] = field(default_factory=dict)
    role_memory: dict[str, RoleMemory] = field(default_factory=dict)
    layouts: dict[str, str] = field(default_factory=dict)  # "deepspeed zero3 dp=8", ...
    model_name: str = ""
    tp: dict[str, int] = field(default_factory=dict)  # each role's tensor-parallel size
    node_size: int = 1  # GPUs per node: GPU i is on node i // node_size
    workers: list[Workers] = field(default_factory=list)  # a recipe's (`plan_recipe`)

    @cached_property
    def devices(self) -> list[DevicePlan]:
        """Every GPU in index order, then the host if roles run there."""
        by_gpu = {
            gpu: DevicePlan(gpu, d.roles, d.memory_bytes, d.capacity_bytes, d.peak_role)
            for gpus, d in self.gpu_groups
            for gpu in gpus
        }
        return [by_gpu[gpu] for gpu in sorted(by_gpu)] + ([self.host] if self.host else [])

    @property
    def judged(self) -> list[DevicePlan]:
        """One device of each GPU group, then the host: every distinct peak of the plan."""
        return [device for _, device in self.gpu_groups] + ([self.host] if self.host else [])

    @property
    def peak_device(self) -> DevicePlan | None:
        """The device closest to (or furthest over) its capacity."""
        judged = [d for d in self.judged if d.capacity_bytes and d.roles]
        if not judged:
            return None
        return max(judged, key=lambda d: d.memory_bytes["total"] / (d.capacity_bytes or 1))

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "fits": self.fits,
            "devices": [d.to_json() for d in self.devices],
            "workers": [w.to_json() for w in self.workers],
            "advice": list(self.advice),
        }


def make_plan(inp: PlanInput) -> Plan:
    """Validate `inp`, place its roles, estimate each device's peak and advise if needed.

    Raises PlanError for requests that cannot work at any memory size: a mapping beyond
    the cluster, TP·PP not dividing a role's GPUs, async mode with actor_train and
    actor_infer sharing GPUs, an unknown role or strategy.
    """
    from rollcli.planning.advice import advise  # advice re-plans through `assess`

    plan = assess(inp)
    if plan.fits:
        return plan
    return replace(plan, advice=advise(inp, plan, assess))


def assess(inp: PlanInput) -> Plan:
    """`make_plan` without advice: placement, per-device peaks and the verdict."""
    validate_input(inp)
    on_cpu = inp.num_gpus == 0
    parsed = {req.role: _place(req, inp) for req in inp.roles}
    placements: dict[str, Placement] = {
        role: "cpu" if where == "cpu" else list(where) for role, where in parsed.items()
    }
    for req in inp.roles:
        validate_role(req, placements[req.role], inp)
    _check_async(inp, placements)

    on_gpus = tuple((role, where) for role, where in parsed.items() if where != "cpu")
    groups = group_gpus(on_gpus, inp.num_gpus, inp.node_size) if on_gpus else []
    shared = {role for group in groups if len(group.roles) > 1 for role in group.roles}
    host_roles = [role for role, where in placements.items() if where == "cpu"]
    memory: dict[str, RoleMemory] = {}
    for req in inp.roles:
        where = placements[req.role]
        on_host = on_cpu or where == "cpu"
        # On the host there is no model parallelism to split by and nothing to offload to.
        estimated = replace(req, tp=1, pp=1, offload_optimizer=False, offload_params=False)
        memory[req.role] = estimate_role(
            estimated if on_host else req,
            inp.model,
            ranks=1 if where == "cpu" else len(where),
            capacity_bytes=inp.host_memory_bytes if on_host else inp.gpu_memory_bytes,
            on_cpu=on_host,
            # Host processes do not offload, so they count as not time-sharing.
            colocated=not on_host and req.role in shared,
        )
        if on_cpu:  # a GPU plan does not judge host memory
            memory[req.role] = with_process_runtime(memory[req.role])

    gpu_groups = [
        (g.gpus, _gpu_plan(g.gpus[0], list(g.roles), memory, inp.gpu_memory_bytes)) for g in groups
    ]
    driver = CPU_DRIVER_BYTES if on_cpu else 0  # a CPU run's driver process is here too
    host = _host_plan(host_roles, memory, inp.host_memory_bytes, driver) if host_roles else None
    problems = [p for m in memory.values() for p in m.problems]
    problems += [
        _too_full(group, device)
        for group, (_, device) in zip(groups, gpu_groups, strict=True)
        if not device.fits
    ]
    if host is not None and not host.fits:
        problems.append(_too_full(None, host))
    notes = [n for m in memory.values() for n in m.notes] + _layout_notes(inp, parsed, groups)
    if on_cpu and any(str(r.device_mapping).strip().lower() != "cpu" for r in inp.roles):
        notes.append("CPU run: GPU device mappings are ignored, every role runs on the host")
    host_problems, host_notes = _host_offload(inp, groups, memory)
    problems += host_problems
    notes += host_notes
    mode: Literal["colocated", "separate", "cpu"]
    if on_cpu:
        mode = "cpu"
    elif shared:
        mode = "colocated"
    else:
        mode = "separate"
    return Plan(
        mode=mode,
        fits=not problems,
        gpu_groups=gpu_groups,
        host=host,
        problems=problems,
        notes=notes,
        placements=placements,
        role_memory=memory,
        layouts={r.role: _layout(r, placements[r.role]) for r in inp.roles},
        model_name=inp.model.name,
        tp={r.role: r.tp for r in inp.roles},
        node_size=inp.node_size,
    )


def _place(req: RoleRequest, inp: PlanInput) -> tuple[int, ...] | Literal["cpu"]:
    if req.role not in ROLES:
        raise PlanError(f"unknown role {req.role!r}; roles are {', '.join(ROLES)}")
    # A CPU run puts every role on the host whatever the recipe maps; still check syntax.
    total = inp.num_gpus or _ANY_GPU_COUNT
    mapping = req.device_mapping
    try:
        where = _parse(tuple(mapping) if isinstance(mapping, list) else mapping, total)
    except PlanError as err:
        raise PlanError(f"{req.role}.device_mapping: {err}") from None
    if inp.num_gpus == 0:
        return "cpu"
    if where == "cpu" and (req.role in TRAIN_ROLES or req.role in INFER_ROLES):
        raise PlanError(
            f"{req.role}.device_mapping is 'cpu' but the cluster has {inp.num_gpus} GPU(s); "
            f"give it GPUs, e.g. '0-{inp.num_gpus - 1}'"
        )
    return where


@lru_cache(maxsize=64)
def _parse(mapping: object, total_gpus: int) -> tuple[int, ...] | Literal["cpu"]:
    """`parse_device_mapping`, cached: the advice ladder re-plans the same mappings."""
    value = list(mapping) if isinstance(mapping, tuple) else mapping
    where = parse_device_mapping(value, total_gpus=total_gpus)  # type: ignore[arg-type]
    return where if where == "cpu" else tuple(where)


def _check_async(inp: PlanInput, placements: dict[str, Placement]) -> None:
    train, infer = placements.get("actor_train"), placements.get("actor_infer")
    if not inp.async_mode or inp.num_gpus == 0 or not train or not infer:
        return
    if not isinstance(train, list) or not isinstance(infer, list):  # "cpu": no GPU to share
        return
    shared = sorted(set(train) & set(infer))
    if shared:
        raise PlanError(
            f"async mode runs rollout alongside training, but actor_train and actor_infer "
            f"share GPU(s) {format_indices(shared)}; give them disjoint device_mapping "
            "(e.g. actor_train '0-3', actor_infer '4-7') or turn async off"
        )


def _gpu_plan(
    gpu: int, roles: list[str], memory: dict[str, RoleMemory], capacity: int
) -> DevicePlan:
    peak, peak_role = MemoryBreakdown(), None
    for role in roles:
        phase = memory[role].active
        for other in roles:
            if other != role:
                phase = phase + memory[other].idle
        if peak_role is None or phase.total > peak.total:
            peak, peak_role = phase, role
    return DevicePlan(gpu, list(roles), peak.as_dict(), capacity, peak_role)


def _host_plan(
    roles: list[str], memory: dict[str, RoleMemory], capacity: int | None, driver: int = 0
) -> DevicePlan:
    total = MemoryBreakdown(runtime=driver)
    for role in roles:
        total = total + memory[role].active
    heaviest = max(roles, key=lambda r: memory[r].active.total)
    return DevicePlan("cpu", list(roles), total.as_dict(), capacity, heaviest)


def _host_offload(
    inp: PlanInput, groups: list[GpuGroup], memory: dict[str, RoleMemory]
) -> tuple[list[str], list[str]]:
    """Host memory each node needs where GPU roles offload: their states, and every GPU
    process's own (`GPU_PROCESS_HOST_BYTES`)."""
    if not any(memory[role].host_bytes for group in groups for role in group.roles):
        return [], []
    per_node: dict[int, int] = {}
    for group in groups:
        each = sum(memory[role].host_bytes + GPU_PROCESS_HOST_BYTES for role in group.roles)
        for node, count in group.per_node.items():
            per_node[node] = per_node.get(node, 0) + count * each
    node, need = max(per_node.items(), key=lambda item: item[1])
    have = inp.host_memory_bytes
    if have is not None and need > have:
        return [
            f"node {node} needs {_gib(need)} of host memory (offloaded states, GPU "
            f"processes) but has {_gib(have)}; offload less or use more nodes"
        ], []
    note = f"offloaded states and GPU processes take up to {_gib(need)} of host memory per node"
    if have is None:
        note += " (not judged: --host-mem or devices.host_mem_gib gives the nodes' RAM)"
    return [], [note]


def _layout_notes(
    inp: PlanInput, parsed: dict[str, tuple[int, ...] | Literal["cpu"]], groups: list[GpuGroup]
) -> list[str]:
    notes = []
    idle = [g for group in groups if not group.roles for g in group.gpus]
    if idle:
        notes.append(f"GPU(s) {format_indices(idle)} have no role")
    for req in inp.roles:
        where = parsed[req.role]
        if where == "cpu" or req.tp == 1:
            continue
        if spans_nodes(where, req.tp, inp.node_size):
            notes.append(
                f"{req.role}: a tp={req.tp} group spans nodes; keep tensor parallel groups "
                "within a node (NVLink) by mapping whole nodes"
            )
    return notes


def _layout(req: RoleRequest, where: Placement) -> str:
    strategy = req.resolved_strategy
    if req.role in FORWARD_ROLES and strategy == default_strategy(req.role):  # plain torch
        strategy = "forward"
    if req.role in HOST_ROLES:
        return "-"
    parts = [strategy]
    if req.role in TRAIN_ROLES and req.zero_stage:
        parts.append(f"zero{req.zero_stage}")
    if where != "cpu":
        if req.tp > 1:
            parts.append(f"tp={req.tp}")
        if req.pp > 1:
            parts.append(f"pp={req.pp}")
        parts.append(f"dp={len(where) // (req.tp * req.pp)}")
    if req.role in TRAIN_ROLES and req.offload_optimizer:
        parts.append("offload-opt")
    if req.role in TRAIN_ROLES and req.offload_params:
        parts.append("offload-params")
    return " ".join(parts)


def _too_full(group: GpuGroup | None, device: DevicePlan) -> str:
    """The problem line of the host, or of a group's GPUs (they peak alike), over capacity."""
    need, have = _gib(device.memory_bytes["total"]), _gib(device.capacity_bytes)
    if group is None:
        return f"the host needs {need} at its peak (all roles together) but has {have}"
    if len(group.gpus) == 1:
        return f"GPU {group.label} needs {need} at its peak ({device.peak_role} computing) but has {have}"
    return (
        f"GPU {group.label} each need {need} at their peak "
        f"({device.peak_role} computing) but have {have}"
    )


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / 1024**3:.1f} GiB"

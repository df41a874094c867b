"""Pure planning for `roll plan` and `roll train`: device mapping, memory, advice.

Imports neither torch nor Ray, so `roll plan` stays fast on any machine.
"""

from rollcli.planning.devices import (
    GPU_KINDS,
    PlanError,
    gpu_memory,
    parse_device_mapping,
)
from rollcli.planning.memory import MemoryBreakdown
from rollcli.planning.planner import DevicePlan, Plan, make_plan
from rollcli.planning.request import PlanInput, RoleRequest

__all__ = [
    "GPU_KINDS",
    "DevicePlan",
    "MemoryBreakdown",
    "Plan",
    "PlanError",
    "PlanInput",
    "RoleRequest",
    "gpu_memory",
    "make_plan",
    "parse_device_mapping",
]

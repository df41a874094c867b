"""Concrete, ordered advice when a plan does not fit.

The advice is a ladder: each step changes one knob on top of the steps before it, the
changed request is re-planned, and the step is kept only if it helps. Order: raise the
ZeRO stage, train LoRA adapters instead of every weight (plain `hf` training only),
offload optimizer then parameters, gradient checkpointing, smaller
micro-batch, tensor parallel inference (only for an engine that runs it, vllm or sglang:
`config/parallel.py`), offload idle colocated roles, lower
gpu_memory_utilization, fewer concurrent sequences, and finally more GPUs.
Each line names the recipe key to set; `RECIPE_KEYS` maps a field to its key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rollcli.planning.advice_steps import LADDER, RECIPE_KEYS, Assess, StepKind, recipe_key
from rollcli.planning.devices import PlanError
from rollcli.planning.request import PlanInput, RoleRequest

if TYPE_CHECKING:
    from rollcli.planning.planner import Plan


def advise(inp: PlanInput, plan: Plan, assess: Assess) -> list[str]:
    """Ordered advice lines for a plan that does not fit; empty when it fits."""
    if plan.fits:
        return []
    steps, final = climb(inp, plan, assess, LADDER)
    lines = [f"{text} → {_outcome(after)}" for text, _, after in steps]
    if not final.fits:
        lines.append(
            f"{inp.model.name} does not fit this setup even so; choose a smaller model "
            "(--model NAME), shorter sequences, or more GPUs"
        )
    return lines


Accepted = tuple[str, PlanInput, "Plan"]  # (what was done, the request after it, its plan)


def climb(
    inp: PlanInput,
    plan: Plan,
    assess: Assess,
    kinds: tuple[StepKind, ...],
    permit: Callable[[PlanInput, PlanInput], bool] | None = None,
) -> tuple[list[Accepted], Plan]:
    """Walk the ladder's `kinds` of steps from `inp`: each step that `permit(current,
    candidate)` allows and that makes the plan less bad is kept, until the plan fits.
    Returns the kept steps and the last plan."""
    accepted: list[Accepted] = []
    tried: set[str] = set()
    current, current_plan = inp, plan
    for make_steps in kinds:
        # Re-ask each kind of step after every accepted change, so steps can chain
        # (offload the optimizer, then the parameters; one role, then the next).
        while True:
            step = next(
                (
                    s
                    for s in make_steps(current, current_plan, assess)
                    if s[0] not in tried and (permit is None or permit(current, s[1]))
                ),
                None,
            )
            if step is None:
                break
            text, candidate = step
            tried.add(text)
            try:
                candidate_plan = assess(candidate)
            except PlanError:
                continue
            if _badness(candidate_plan) >= _badness(current_plan):
                continue
            current, current_plan = candidate, candidate_plan
            accepted.append((text, candidate, candidate_plan))
            if candidate_plan.fits:
                return accepted, candidate_plan
    return accepted, current_plan


def changed_keys(before: PlanInput, after: PlanInput) -> dict[str, object] | None:
    """The recipe keys (`key: value`) that turn `before` into `after`; None where the
    change is not a role's recipe key (a different set of roles or GPUs, LoRA's adapter
    size)."""
    if (before.num_gpus, before.num_nodes) != (after.num_gpus, after.num_nodes):
        return None
    if [r.role for r in before.roles] != [r.role for r in after.roles]:
        return None
    keys: dict[str, object] = {}
    for old, new in zip(before.roles, after.roles, strict=True):
        for name in RoleRequest.__dataclass_fields__:
            value = getattr(new, name)
            if value == getattr(old, name):
                continue
            if name not in RECIPE_KEYS:
                return None
            keys[recipe_key(name, new.role)] = value
    return keys


def _badness(plan: Plan) -> tuple[int, float]:
    worst = max(
        (d.memory_bytes["total"] / d.capacity_bytes for d in plan.judged if d.capacity_bytes),
        default=0.0,
    )
    role_problems = sum(len(m.problems) for m in plan.role_memory.values())
    return role_problems, worst


def _outcome(plan: Plan) -> str:
    if plan.fits:
        return "fits"
    worst = plan.peak_device
    if worst is None or worst.fits:
        return f"still {len(plan.problems)} problem(s)"
    assert worst.capacity_bytes is not None  # the peak is judged against a capacity
    return (
        f"peak {worst.memory_bytes['total'] / 1024**3:.1f} of "
        f"{worst.capacity_bytes / 1024**3:.1f} GiB"
    )

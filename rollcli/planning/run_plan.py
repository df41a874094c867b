"""The plan of the run that starts, made once: `roll train`'s pre-launch check computes it
(`plan_run`), and the launcher hands it down to the run's control (`RunControl.plan`: the
memory each role was planned for) and the cluster builder (`runtime/workers_setup.py`:
each role's workers, CPUs, GPUs and arguments). A resumed run plans its recipe as resumed
(its overrides applied), once, the same way. Imports neither torch nor Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rollcli.config.errors import ConfigError
from rollcli.planning.from_recipe import plan_request, recipe_plan_input

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.planner import Plan
    from rollcli.planning.request import PlanInput


@dataclass(frozen=True)
class RunPlan:
    """A run's plan (`plan`, what `roll plan` prints) and the request it was made from
    (`request`: each role's strategy, dtype and engine, which `runtime/role_args.py` turns
    into the workers' arguments)."""

    request: PlanInput
    plan: Plan

    def planned_per_rank(self) -> dict[str, int]:
        """The plan's bytes for one rank of each role while it computes (what `memory.json`
        compares a measured peak with)."""
        return {role: memory.active.total for role, memory in self.plan.role_memory.items()}


def plan_run(cfg: RecipeConfig) -> RunPlan:
    """The pre-launch check of `roll train` (and `--dry-run`): the plan of `cfg`, or a
    ConfigError (with the advice) where the run cannot fit."""
    request = recipe_plan_input(cfg)
    plan = plan_request(cfg, request)
    if plan.fits:
        return RunPlan(request, plan)
    from rollcli.planning.render import merge_gpu_lines

    gpus = cfg.resources.gpus
    where = "the host" if plan.mode == "cpu" else f"{gpus} GPU(s)"
    problems = "; ".join(merge_gpu_lines(plan.problems))
    lines = [f"the plan for {cfg.model} on {where} does not fit: {problems}"]
    if plan.advice:
        lines.append("what to change: " + " | ".join(plan.advice))
    flags = f" --model {cfg.model}" + (f" --gpus {gpus}" if gpus else "")
    flags += f" --nodes {cfg.devices.nodes}" if cfg.devices.nodes > 1 else ""
    lines.append(f"`roll plan {cfg.name}{flags}` shows the whole plan")
    raise ConfigError(". ".join(lines))

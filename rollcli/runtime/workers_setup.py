"""Build any pipeline's worker clusters: the role table (`planning.role_table.roles_for`) and
the run's plan (`planning.run_plan.RunPlan`, made once at launch) in, one `Cluster` per role
out. The one place that gives workers their arguments and their CPUs.

What each worker gets:
- its share of the machine from the plan (`plan.workers`, what `roll plan` prints): the
  model roles colocated on CPU get the threads of every core they share (split between a
  role's own ranks) and an equal part of the cores for Ray's bookkeeping; light roles
  (reward, env) a sliver each. On GPUs each rank sits in its GPU's placement-group bundle
  with its share of that GPU (`DevicePlacement`; a tensor-parallel engine's rank sees and
  holds the `tp` GPUs of its group); a CPU run on a Ray cluster of several nodes pins the
  model roles' ranks to nodes (`NodeSpread`).
- its args object, from the worker table (`worker_table.WORKERS`: each role's class and
  builder): the plan's decisions (training strategy and precision, engine, dtypes:
  `role_args.role_args`), and the recipe's trainer settings (`train.*`, `critic.*`),
  reward function and environments.
actor_train with more than one rank joins a data-parallel process group here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from rollcli.config.pipeline_spec import spec_of
from rollcli.config.roles import ROLE_NAMES
from rollcli.distributed import data_parallel
from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.planning.role_table import Role, Workers, roles_for
from rollcli.runtime.role_args import PlannedArgs, role_args
from rollcli.runtime.worker_table import WORKERS, BuildContext

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.distributed.placement import DevicePlacement, NodeSpread
    from rollcli.planning.planner import Plan
    from rollcli.planning.run_plan import RunPlan
    from rollcli.runtime.run_control import RunControl


@dataclass
class Placement:
    """Where a run's workers go: its plan (the one `roll plan` prints and `roll train`
    checked) with the plan's decisions for the workers (`planned`), a GPU plan's placement
    groups (`devices`), or a CPU run's nodes on a Ray cluster of several (`spread`)."""

    plan: Plan
    planned: PlannedArgs
    devices: DevicePlacement | None = None
    spread: NodeSpread | None = None

    @classmethod
    def build(cls, cfg: RecipeConfig, run_plan: RunPlan) -> Placement:
        """Reserve the GPUs of `run_plan` (the run's plan of `cfg`, made once before it
        started: planning/run_plan.py) on a GPU run, or find its nodes on a CPU run."""
        from rollcli.distributed.placement import DevicePlacement, NodeSpread

        plan = run_plan.plan
        planned = role_args(cfg, run_plan.request, plan)
        if cfg.resources.gpus > 0:  # a CPU run's plan is the CPU plan: nothing to place
            return cls(plan, planned, devices=DevicePlacement.build(plan))
        return cls(plan, planned, spread=NodeSpread.build())

    def remove(self) -> None:
        if self.devices is not None:
            self.devices.remove()


class Clusters(dict[str, Cluster]):
    """A run's clusters by role, in the role table's order (actor_train, the trained one,
    first); `clusters.critic` is None where the recipe runs no critic."""

    train_group: str | None = None  # data parallel: the host:port actor_train's ranks met at

    def __getattr__(self, name: str) -> Cluster | None:
        if name in ROLE_NAMES:
            return self.get(name)
        raise AttributeError(name)

    def all(self) -> list[Cluster]:
        return list(self.values())

    def kill(self) -> None:
        for cluster in self.values():
            cluster.kill()


def start_clusters(
    cfg: RecipeConfig, ctl: RunControl, *, model_path: str, student_path: str | None = None
) -> Clusters:
    """The offline pipelines' workers (sft, dpo, distill): every role of the recipe on the
    run's plan (`ctl.plan`), told to `ctl` (fault injection, checkpoints' RNG)."""
    ctl.ui.phase("starting workers")
    placement = Placement.build(cfg, ctl.plan)
    clusters = build_clusters(
        cfg, roles_for(cfg), placement, model_path=model_path, student_path=student_path
    )
    ctl.started(clusters.all())
    return clusters


def build_clusters(
    cfg: RecipeConfig,
    roles: list[Role],
    placement: Placement,
    *,
    model_path: str,
    student_path: str | None = None,
) -> Clusters:
    """A cluster per role of `roles` (`roles_for(cfg)`), sized as `placement.plan` says.
    `model_path`: the recipe's model; `student_path`: distill's student, which actor_train
    trains (the recipe's model is then the teacher)."""
    sizes = {w.role: w for w in placement.plan.workers}
    ctx = BuildContext(cfg, placement.planned, model_path, student_path, sizes)
    heavy = [r.name for r in roles if not r.light]
    pipeline = spec_of(cfg).name
    clusters = Clusters()
    for role in roles:
        size, row = sizes[role.name], WORKERS[role.name]
        clusters[role.name] = Cluster(
            role.name,
            row.worker(pipeline),
            size.ranks,
            WorkerResources(num_cpus=size.num_cpus[0], monitor=row.monitor),
            partial(row.build, ctx),  # rank -> its args object
            placement=_where(placement, role, size, heavy),
        )
    if clusters["actor_train"].world_size > 1:
        clusters.train_group = data_parallel.connect(clusters["actor_train"])
    return clusters


def _where(placement: Placement, role: Role, size: Workers, heavy: list[str]) -> list | None:
    """Each rank's placement: its GPU bundle, or its node in a CPU run over several nodes
    (None: Ray schedules the ranks by their CPUs)."""
    if placement.devices is not None:
        slots = placement.devices.for_role(role.name)
        return slots[: size.ranks] if slots else None
    if placement.spread is not None and not role.light:
        return placement.spread.ranks(heavy.index(role.name), size.ranks, size.num_cpus[0])
    return None

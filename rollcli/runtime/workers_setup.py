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
- the plan's decisions (training strategy and precision, engine, dtypes:
  `role_args.role_args`), and the recipe's trainer settings (`train.*`, `critic.*`),
  reward function and environments.
actor_train with more than one rank joins a data-parallel process group here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rollcli.config.pipeline_spec import spec_of
from rollcli.distributed import data_parallel
from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.planning.role_table import TABLE, Role, Workers, roles_for
from rollcli.runtime.role_args import role_args
from rollcli.strategies.lora import LoraSpec
from rollcli.strategies.trainer import TrainerArgs

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.distributed.placement import DevicePlacement, NodeSpread
    from rollcli.planning.planner import Plan
    from rollcli.planning.run_plan import RunPlan
    from rollcli.runtime.run_control import RunControl


@dataclass
class Placement:
    """Where a run's workers go: its plan (the one `roll plan` prints and `roll train`
    checked) with the plan's decisions as worker arguments (`args`), a GPU plan's placement
    groups (`devices`), or a CPU run's nodes on a Ray cluster of several (`spread`)."""

    plan: Plan
    args: dict[str, dict[str, Any]]
    devices: DevicePlacement | None = None
    spread: NodeSpread | None = None

    @classmethod
    def build(cls, cfg: RecipeConfig, run_plan: RunPlan) -> Placement:
        """Reserve the GPUs of `run_plan` (the run's plan of `cfg`, made once before it
        started: planning/run_plan.py) on a GPU run, or find its nodes on a CPU run."""
        from rollcli.distributed.placement import DevicePlacement, NodeSpread

        plan = run_plan.plan
        args = role_args(cfg, run_plan.request, plan)
        if cfg.resources.gpus > 0:  # a CPU run's plan is the CPU plan: nothing to place
            return cls(plan, args, devices=DevicePlacement.build(plan))
        return cls(plan, args, spread=NodeSpread.build())

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


ROLE_NAMES = {role.name for role in TABLE}


@dataclass(frozen=True)
class BuildContext:
    """What `worker_args` reads: the recipe, the plan's worker arguments (`role_args`), the
    models (distill: the teacher and the student) and each role's workers (`plan.workers`)."""

    cfg: RecipeConfig
    args: dict[str, dict[str, Any]]
    model_path: str
    student_path: str | None
    sizes: dict[str, Workers]


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
    ctx = BuildContext(cfg, placement.args, model_path, student_path, sizes)
    heavy = [r.name for r in roles if not r.light]
    clusters = Clusters()
    for role in roles:
        size = sizes[role.name]
        clusters[role.name] = Cluster(
            role.name,
            worker_class(role.worker),
            size.ranks,
            WorkerResources(num_cpus=size.num_cpus[0], monitor=role.name == "actor_infer"),
            lambda rank, role=role: worker_args(ctx, role, rank),
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


def worker_class(path: str) -> type:
    """`"module:Class"` → the class."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def worker_args(ctx: BuildContext, role: Role, rank: int) -> dict[str, Any]:
    """The constructor arguments of `role`'s worker `rank`."""
    cfg, size = ctx.cfg, ctx.sizes[role.name]
    if role.name == "reward":
        reward = cfg.reward
        return {
            "fn": reward.fn,
            "options": reward.worker_options,
            "timeout_s": reward.timeout_s,
            "convention": reward.convention,
        }
    if role.name in ("env", "env_val"):
        from rollcli.rollout.agentic_setup import env_kwargs

        validation = role.name == "env_val"
        return {"env": cfg.agentic.env, "env_kwargs": env_kwargs(cfg.agentic, validation)}
    if role.name == "env_cross" and cfg.agentic.val_env is not None:
        from rollcli.rollout.agentic_setup import cross_env_kwargs

        return {"env": cfg.agentic.val_env.env, "env_kwargs": cross_env_kwargs(cfg.agentic)}
    model = {"model_path": ctx.model_path, "num_threads": size.threads}
    if role.name == "teacher":  # the recipe's model, forward only, on the CPU
        return model
    model["num_gpus"] = size.gpus[rank]
    if role.name == "actor_train":
        return {
            **model,
            "trainer_args": trainer_args(cfg),
            "gradient_checkpointing": cfg.train.gradient_checkpointing,
            "lora": LoraSpec.from_section(cfg.train.lora),
            "model_path": ctx.student_path or ctx.model_path,
            "seed": cfg.seed,  # the same initial weights on every rank
            "rank": rank,
            "world_size": size.ranks,
            **ctx.args["actor_train"],  # strategy, ZeRO stage, precision
        }
    if role.name == "actor_infer":
        args = {**model, "seed": cfg.seed + rank, "rank": rank, **ctx.args["actor_infer"]}
        if spec_of(cfg).rollout == "episodes":  # their KV stays between turns (hf engine)
            from rollcli.rollout.agentic_setup import turn_cache_mib

            args["session_mib"] = turn_cache_mib(cfg.agentic, args["engine"])
        return args
    if role.name == "critic":
        critic = cfg.critic
        return {
            **model,
            "seed": cfg.seed,
            "lr": critic.lr,
            "grad_clip": critic.grad_clip,
            **ctx.args["critic"],  # its micro-batch size
        }
    return {**model, **ctx.args.get(role.name, {})}  # reference: its dtype


def trainer_args(cfg: RecipeConfig) -> TrainerArgs:
    """The recipe's optimizer settings of actor_train (any pipeline's trainer), as the
    strategy's trainer takes them."""
    train = cfg.train
    return TrainerArgs(
        lr=train.lr,
        betas=train.betas,
        weight_decay=train.weight_decay,
        grad_clip=train.grad_clip,
        warmup_steps=train.warmup_steps,
        total_steps=train.steps,
        lr_schedule=train.lr_schedule,
        lr_decay_steps=train.lr_decay_steps,
        min_lr_ratio=train.min_lr_ratio,
    )

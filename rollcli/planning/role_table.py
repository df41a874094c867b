"""The role table: which worker roles each pipeline runs, read by the planner (`roll plan`),
the launcher's pre-check (`roll train`), the cluster builder and fault injection.

A `Role` says what a role's workers are: what they hold (a model to
train, a model behind an inference engine, a frozen model for forwards, or no model), the
`devices.<key>` that places them, how many there are and which fault points kill them.
`roles_for(cfg)` is the list a recipe runs:

| role        | pipelines                  | when                                    |
| ----------- | -------------------------- | --------------------------------------- |
| actor_train | all                        | always                                  |
| actor_infer | rlvr, agentic              | always                                  |
| reference   | rlvr, agentic, dpo         | KL on (dpo: always), without train.lora |
| critic      | rlvr, agentic              | a GAE estimator                         |
| teacher     | distill                    | always (the recipe's model)             |
| reward      | rlvr                       | always                                  |
| env         | agentic                    | always                                  |
| env_val     | agentic                    | always (validation environments)        |
| env_cross   | agentic                    | agentic.val_env (the second val env)    |

Planning holds placement facts only: each role's worker class, and the args object it is
built from, are the runtime's (`runtime/worker_table.py`, above the workers it imports).

`size_workers` gives each role's workers their Ray CPUs and torch threads: the light roles
(no model) take a fixed sliver per worker; the model roles run in alternating phases of the
loop on CPU, so each of their workers gets an equal share of the remaining cores for Ray's
bookkeeping and the threads of every core (split between a role's own ranks). A GPU plan's
ranks take `CPUS_PER_GPU` times their GPU share instead (the placement groups' bundles).

Pure: imports neither torch nor Ray.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from rollcli.config import roles as R
from rollcli.config.pipeline_spec import roles_run
from rollcli.config.recipe import AgenticRecipe, RLVRRecipe, rollout_of

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig

Holds = Literal["train", "infer", "forward", "none"]
CPUS_PER_GPU = 1.0  # the CPUs of a GPU's placement-group bundle
MIN_SHARE = 0.1  # Ray CPUs the model roles share at the least (a machine full of light roles)


@dataclass(frozen=True)
class Role:
    """One worker role. `holds`: train (weights, gradients, optimizer), infer (weights and an
    engine's KV cache), forward (frozen weights), none (no model: rule rewards, environments).
    `cpus`: Ray CPUs per worker of a light role (0: a model role, sized by `size_workers`).
    `devices`: its `devices.<key>` placement. `faults`: the `kill-worker@POINT` points that
    kill its first worker (`runs.faults.fault_roles`). `single`: one worker whatever a GPU
    plan maps (the critic: its update is not data parallel yet). `ranks`: its workers in a
    CPU run (a GPU plan's mapping decides the model roles' there)."""

    name: str
    holds: Holds
    devices: str
    faults: tuple[str, ...] = ()
    cpus: float = 0.0
    single: bool = False
    ranks: int = 1

    @property
    def light(self) -> bool:
        return self.holds == "none"


ACTOR_TRAIN = Role("actor_train", "train", "actor_train", faults=("train", "sync", "checkpoint"))
ACTOR_INFER = Role("actor_infer", "infer", "actor_infer", faults=("generate", "validate"))
REFERENCE = Role("reference", "forward", "reference", ("forward",))
CRITIC = Role("critic", "train", "critic", single=True)
TEACHER = Role("teacher", "forward", "teacher", ("forward",))
REWARD = Role("reward", "none", "reward", ("reward",), cpus=0.1)
ENV = Role("env", "none", "env", cpus=0.05)
ENV_VAL = Role("env_val", "none", "env", cpus=0.05)
ENV_CROSS = Role("env_cross", "none", "env", cpus=0.05)
TABLE = (ACTOR_TRAIN, ACTOR_INFER, REFERENCE, CRITIC, TEACHER, REWARD, ENV, ENV_VAL, ENV_CROSS)


def names(holds: Holds) -> tuple[str, ...]:
    """The table's roles that hold `holds`.

    >>> names("train"), names("forward")
    (('actor_train', 'critic'), ('reference', 'teacher'))
    """
    return tuple(r.name for r in TABLE if r.holds == holds)


def roles_for(cfg: RecipeConfig) -> list[Role]:
    """The roles `cfg` runs, in the table's order, with their workers of a CPU run."""
    by_name = {r.name: r for r in TABLE}
    roles = [by_name[name] for name in roles_run(cfg)]

    def envs() -> int:
        assert isinstance(cfg, AgenticRecipe)  # the env roles are agentic's
        return cfg.agentic.num_env_workers

    def rewards() -> int:
        assert isinstance(cfg, RLVRRecipe)  # the reward role is rlvr's
        return cfg.reward.num_workers

    ranks: dict[str, Callable[[], int]] = {
        R.ACTOR_TRAIN: lambda: cfg.train.num_workers,
        R.ACTOR_INFER: lambda: rollout_of(cfg).num_workers,
        R.REWARD: rewards,
        R.ENV: envs,
        R.ENV_VAL: envs,
        R.ENV_CROSS: envs,
    }
    out = []
    for role in roles:
        if role.name in ranks:
            role = replace(role, ranks=ranks[role.name]())
        out.append(role)
    return out


@dataclass(frozen=True)
class Workers:
    """How a role's workers start: Ray CPUs, torch threads (None: a light role sets none)
    and GPU share (0: the CPU) of each rank."""

    role: str
    num_cpus: tuple[float, ...]
    threads: int | None
    gpus: tuple[float, ...]

    @property
    def ranks(self) -> int:
        return len(self.num_cpus)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "ranks": self.ranks,
            "num_cpus": list(self.num_cpus),
            "threads": self.threads,
            "num_gpus": list(self.gpus),
        }


def size_workers(
    roles: list[Role], cores: float, gpu_shares: dict[str, list[float]] | None = None
) -> list[Workers]:
    """Each role's workers on `cores` CPUs; `gpu_shares`: a GPU plan's ranks of each role
    (their share of a GPU each: `planning.ranks.rank_slots`), which then set its workers.

    >>> [(w.role, w.num_cpus, w.threads) for w in size_workers(
    ...     [replace(ACTOR_TRAIN, ranks=2), ACTOR_INFER, replace(REWARD, ranks=2)], 2.0)]
    [('actor_train', (0.6, 0.6), 1), ('actor_infer', (0.6,), 2), ('reward', (0.1, 0.1), None)]
    """
    shares = gpu_shares or {}

    def gpus(role: Role) -> list[float]:
        placed = shares.get(role.name, [])
        return placed[:1] if role.single else placed

    ranks = {r.name: len(gpus(r)) or r.ranks for r in roles}
    light = sum(r.cpus * ranks[r.name] for r in roles if r.light)
    heavy = sum(ranks[r.name] for r in roles if not r.light)
    share = round(max(cores - light, MIN_SHARE) / max(heavy, 1), 3)
    threads = max(1, int(cores))
    out = []
    for role in roles:
        n, placed = ranks[role.name], gpus(role)
        if role.light:
            cpus, each = (role.cpus,) * n, None
        else:
            cpus_of = {g: round(CPUS_PER_GPU * g, 4) for g in set(placed)}
            cpus = tuple(map(cpus_of.__getitem__, placed)) or (share,) * n
            each = max(1, threads // n)
        out.append(Workers(role.name, cpus, each, tuple(placed) or (0.0,) * n))
    return out

"""The worker table: each role's worker class (imported, never named by a string) and the
function that builds its args object from the recipe, the plan and the rank.

`WORKERS[role]` is a `WorkerRow`: `classes` gives the worker class per pipeline (actor_train
trains with the pipeline's own worker: `TRAINERS`; every other role runs one class
everywhere) and `build(ctx, rank)` gives rank `rank`'s args object, the one frozen argument
its constructor takes. The cluster builder (`workers_setup.build_clusters`) looks a role up
here and nowhere else; tests/runtime/test_worker_table.py checks the table covers every role
of `planning.role_table.TABLE` and every pipeline, and that each class takes one frozen
args object.

Following `train.lr`: `build_clusters` -> `WORKERS["actor_train"].build` (`_actor_train`)
-> `trainer_args` (`TrainerArgs.lr`) -> `TrainedModelArgs.trainer` -> `TrainedModelWorker`
-> `train_engines.make_trainer` -> the strategy's trainer -> `torch.optim.AdamW`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rollcli.config.pipeline_spec import PIPELINES, spec_of
from rollcli.config.recipe import AgenticRecipe, RLVRRecipe, rollout_of
from rollcli.models.replay_modes import RouterReplay
from rollcli.rollout.agentic_setup import cross_env_kwargs, env_kwargs, turn_cache_mib
from rollcli.runtime.role_args import PlannedArgs
from rollcli.strategies.lora import LoraSpec
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.critic import CriticArgs, CriticWorker
from rollcli.workers.distill import StudentWorker, TeacherArgs, TeacherWorker
from rollcli.workers.dpo_train import DPOTrainWorker
from rollcli.workers.env_worker import EnvArgs, EnvWorker
from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
from rollcli.workers.reward import RewardArgs, RewardWorker
from rollcli.workers.sft_train import SFTTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

if TYPE_CHECKING:
    from rollcli.config.agentic_section import AgenticConfig
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.role_table import Workers

# actor_train's worker in each pipeline (config/pipeline_spec.SPECS)
TRAINERS: dict[str, type] = {
    "rlvr": ActorTrainWorker,
    "agentic": ActorTrainWorker,
    "dpo": DPOTrainWorker,
    "sft": SFTTrainWorker,
    "distill": StudentWorker,
}


@dataclass(frozen=True)
class BuildContext:
    """What the build functions read: the recipe, the plan's decisions (`role_args`), the
    models (distill: the teacher and the student) and each role's workers (`plan.workers`)."""

    cfg: RecipeConfig
    planned: PlannedArgs
    model_path: str
    student_path: str | None
    sizes: dict[str, Workers]


@dataclass(frozen=True)
class WorkerRow:
    """A role's worker class in each pipeline and the builder of its rank's args object;
    `monitor`: its cluster takes cheap calls beside a busy one (`Cluster.poll`: actor_infer's
    progress and aborts while it generates)."""

    classes: Mapping[str, type]
    build: Callable[[BuildContext, int], Any]
    monitor: bool = False

    def worker(self, pipeline: str) -> type:
        return self.classes[pipeline]


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


def _actor_train(ctx: BuildContext, rank: int) -> TrainedModelArgs:
    cfg, size = ctx.cfg, ctx.sizes["actor_train"]
    return TrainedModelArgs(
        model_path=ctx.student_path or ctx.model_path,  # distill: the student
        trainer=trainer_args(cfg),
        strategy=ctx.planned.strategy,  # strategy, ZeRO stage, offloads
        precision=ctx.planned.precision,
        lora=LoraSpec.from_section(cfg.train.lora),
        gradient_checkpointing=cfg.train.gradient_checkpointing,
        router_replay=_router_replay(cfg),
        seed=cfg.seed,  # the same initial weights on every rank
        rank=rank,
        world_size=size.ranks,
        num_threads=size.threads or 1,
        num_gpus=size.gpus[rank],
    )


def _actor_infer(ctx: BuildContext, rank: int) -> ActorInferArgs:
    cfg, size, infer = ctx.cfg, ctx.sizes["actor_infer"], ctx.planned.infer
    assert infer is not None, "the plan has no actor_infer"
    # multi-turn episodes: their KV stays between turns (hf engine)
    episodes = spec_of(cfg).plays_episodes
    return ActorInferArgs(
        model_path=ctx.model_path,
        engine=infer.engine,
        engine_options=infer.options,
        seed=cfg.seed + rank,
        rank=rank,
        num_threads=size.threads or 1,
        num_gpus=size.gpus[rank],
        dtype=infer.dtype,
        session_mib=turn_cache_mib(_agentic(cfg), infer.engine) if episodes else 0.0,
        int8=infer.int8,
        decode_batch=infer.decode_batch,
        bf16_linears=infer.bf16_linears,
        continuous=rollout_of(cfg).continuous_batching,
    )


def _reference(ctx: BuildContext, rank: int) -> ReferenceArgs:
    size, dtype = ctx.sizes["reference"], ctx.planned.reference_dtype
    assert dtype is not None, "the plan has no reference"
    return ReferenceArgs(
        ctx.model_path,
        dtype=dtype,
        num_threads=size.threads or 1,
        num_gpus=size.gpus[rank],
        router_replay=_router_replay(ctx.cfg),
    )


def _router_replay(cfg: Any) -> RouterReplay:
    """The RL pipelines' `algorithm.router_replay`; `off` for the others."""
    algorithm = getattr(cfg, "algorithm", None)
    return "off" if algorithm is None else algorithm.router_replay


def _critic(ctx: BuildContext, rank: int) -> CriticArgs:
    cfg = ctx.cfg
    assert isinstance(cfg, (RLVRRecipe, AgenticRecipe)), "the critic is an RL pipeline's"
    critic, size, micro = cfg.critic, ctx.sizes["critic"], ctx.planned.critic_micro_batch
    assert micro is not None, "the plan has no critic"
    return CriticArgs(
        ctx.model_path,
        lr=critic.lr,
        grad_clip=critic.grad_clip,
        micro_batch_size=micro,  # the plan's
        seed=ctx.cfg.seed,
        num_threads=size.threads or 1,
        num_gpus=size.gpus[rank],
    )


def _teacher(ctx: BuildContext, rank: int) -> TeacherArgs:
    """The recipe's model, forward only, on the CPU."""
    return TeacherArgs(ctx.model_path, num_threads=ctx.sizes["teacher"].threads or 1)


def _reward(ctx: BuildContext, rank: int) -> RewardArgs:
    assert isinstance(ctx.cfg, RLVRRecipe), "reward workers are rlvr's"
    reward = ctx.cfg.reward
    return RewardArgs(
        reward.fn,
        options=reward.worker_options,
        timeout_s=reward.timeout_s,
        convention=reward.convention,
    )


def _env(ctx: BuildContext, rank: int) -> EnvArgs:
    return EnvArgs(_agentic(ctx.cfg).env, env_kwargs(_agentic(ctx.cfg), validation=False))


def _env_val(ctx: BuildContext, rank: int) -> EnvArgs:
    return EnvArgs(_agentic(ctx.cfg).env, env_kwargs(_agentic(ctx.cfg), validation=True))


def _env_cross(ctx: BuildContext, rank: int) -> EnvArgs:
    """The second validation env (`agentic.val_env`; the role runs only with one)."""
    agentic = _agentic(ctx.cfg)
    assert agentic.val_env is not None, "env_cross runs only with agentic.val_env"
    return EnvArgs(agentic.val_env.env, cross_env_kwargs(agentic))


def _agentic(cfg: RecipeConfig) -> AgenticConfig:
    """The agentic section of the recipe whose env and engine roles are being built."""
    assert isinstance(cfg, AgenticRecipe), "env workers are the agentic pipeline's"
    return cfg.agentic


def _everywhere(cls: type) -> dict[str, type]:
    return dict.fromkeys(PIPELINES, cls)


WORKERS: dict[str, WorkerRow] = {
    "actor_train": WorkerRow(TRAINERS, _actor_train),
    "actor_infer": WorkerRow(_everywhere(ActorInferWorker), _actor_infer, monitor=True),
    "reference": WorkerRow(_everywhere(ReferenceWorker), _reference),
    "critic": WorkerRow(_everywhere(CriticWorker), _critic),
    "teacher": WorkerRow(_everywhere(TeacherWorker), _teacher),
    "reward": WorkerRow(_everywhere(RewardWorker), _reward),
    "env": WorkerRow(_everywhere(EnvWorker), _env),
    "env_val": WorkerRow(_everywhere(EnvWorker), _env_val),
    "env_cross": WorkerRow(_everywhere(EnvWorker), _env_cross),
}


def worker_class(role: str, cfg: RecipeConfig | str) -> type:
    """The worker class of `role` in `cfg`'s pipeline (a recipe or a pipeline name)."""
    return WORKERS[role].worker(spec_of(cfg).name)


def worker_args(ctx: BuildContext, role: str, rank: int) -> Any:
    """The args object of `role`'s worker `rank`."""
    return WORKERS[role].build(ctx, rank)

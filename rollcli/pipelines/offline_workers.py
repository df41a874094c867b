"""Worker settings of the offline pipelines, read from the recipe in one place."""

from __future__ import annotations

import os
from typing import Any

from rollcli.config.recipe import RecipeConfig
from rollcli.distributed.cluster import WorkerResources
from rollcli.pipelines.workers_setup import plan_cpu
from rollcli.strategies.lora import LoraSpec


def heavy_resources(cfg: RecipeConfig, roles: int) -> tuple[WorkerResources, int]:
    """Ray resources and torch threads of each of `roles` colocated model workers: they run
    in alternating phases, so each gets the threads of every core (see workers_setup)."""
    cpu = plan_cpu(cfg.resources.num_cpus or float(os.cpu_count() or 1), roles, 0)
    return WorkerResources(num_cpus=cpu.heavy_cpus), cpu.heavy_threads


def trainer_kwargs(cfg: RecipeConfig, model_path: str, threads: int) -> dict[str, Any]:
    """Constructor arguments of a trained worker (an `ActorTrainWorker` subclass)."""
    train = cfg.train
    return {
        "model_path": model_path,
        "num_threads": threads,
        "seed": cfg.seed,
        "lr": train.lr,
        "betas": train.betas,
        "weight_decay": train.weight_decay,
        "warmup_steps": train.warmup_steps,
        "grad_clip": train.grad_clip,
        "gradient_checkpointing": train.gradient_checkpointing,
        "lora": LoraSpec.from_section(train.lora),
    }

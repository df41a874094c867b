"""The whole recipe: one YAML file validated into a frozen `RecipeConfig`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rollcli.config.algorithm import AlgorithmConfig
from rollcli.config.sections import (
    CriticConfig,
    DataConfig,
    ResourcesConfig,
    RewardConfig,
    RolloutConfig,
    RunConfig,
    Section,
    TrainConfig,
)

PIPELINES = ("rlvr", "agentic", "dpo", "sft", "distill")
# Advantage estimators that compare samples of the same prompt need at least two of them.
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_pp_baseline")


class RecipeConfig(Section):
    name: str
    description: str = ""
    aliases: list[str] = Field(default_factory=list)  # short names `roll train` accepts
    pipeline: Literal["rlvr", "agentic", "dpo", "sft", "distill"]
    model: str = "smollm2-135m"
    seed: int = 42
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    critic: CriticConfig = Field(default_factory=CriticConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    run: RunConfig = Field(default_factory=RunConfig)

    @model_validator(mode="after")
    def _consistent(self) -> RecipeConfig:
        est = self.algorithm.advantage
        if est in GROUP_ESTIMATORS and self.rollout.group_size < 2:
            raise ValueError(
                f"rollout.group_size = {self.rollout.group_size}: the {est!r} advantage compares "
                "samples of the same prompt, so it needs group_size >= 2"
            )
        batch = self.rollout.batch_size
        if batch % self.rollout.group_size:
            raise ValueError(
                f"rollout.batch_size = {batch} is not divisible by rollout.group_size = "
                f"{self.rollout.group_size}; use a multiple such as "
                f"{(batch // self.rollout.group_size + 1) * self.rollout.group_size}"
            )
        mini = self.train.mini_batch_size
        if mini is not None and batch % mini:
            raise ValueError(
                f"train.mini_batch_size = {mini} does not divide rollout.batch_size = {batch}"
            )
        return self

    @property
    def needs_reference(self) -> bool:
        return self.algorithm.needs_reference

    @property
    def needs_critic(self) -> bool:
        return self.algorithm.needs_critic

"""The whole recipe: one YAML file validated into a frozen `RecipeConfig`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rollcli.config.algorithm import AlgorithmConfig
from rollcli.config.sections import (
    AgenticConfig,
    CriticConfig,
    DataConfig,
    DevicesConfig,
    DistillConfig,
    DPOConfig,
    ResourcesConfig,
    RewardConfig,
    RolloutConfig,
    RunConfig,
    Section,
    SFTConfig,
    TrainConfig,
)

PIPELINES = ("rlvr", "agentic", "dpo", "sft", "distill")
# Advantage estimators that compare samples of the same prompt need at least two of them.
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_pp_baseline")
# Pipelines that train on a fixed data set (no rollout); each has its own recipe section.
OFFLINE_PIPELINES = ("sft", "dpo", "distill")


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
    devices: DevicesConfig = Field(default_factory=DevicesConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    sft: SFTConfig = Field(default_factory=SFTConfig)
    dpo: DPOConfig = Field(default_factory=DPOConfig)
    distill: DistillConfig = Field(default_factory=DistillConfig)
    agentic: AgenticConfig = Field(default_factory=AgenticConfig)

    @model_validator(mode="after")
    def _consistent(self) -> RecipeConfig:
        for name in OFFLINE_PIPELINES:
            section = getattr(self, name)
            if self.pipeline != name and section != type(section)():
                raise ValueError(
                    f"the {name}.* keys apply to the {name} pipeline, and this recipe's "
                    f"pipeline is {self.pipeline!r}; remove them"
                )
        if self.pipeline in OFFLINE_PIPELINES:
            if self.train.shared_prefix:
                raise ValueError(
                    f"train.shared_prefix applies to the RL pipelines (rlvr, agentic), whose "
                    f"rows are prompt + response; {self.pipeline} has no groups of samples "
                    "sharing a prompt, so remove it"
                )
            if self.train.mini_batch_size is not None:
                raise ValueError(
                    f"train.mini_batch_size applies to the RL pipelines; {self.pipeline} takes "
                    f"one optimizer step per {self.pipeline}.batch_size samples, so set that"
                )
            return self
        if self.pipeline != "agentic" and self.agentic != AgenticConfig():
            raise ValueError(
                f"the agentic.* keys apply to the agentic pipeline, and this recipe's "
                f"pipeline is {self.pipeline!r}; remove them"
            )
        if self.pipeline == "agentic":
            _check_agentic(self)
            return self
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

    @model_validator(mode="after")
    def _nodes_need_gpus(self) -> RecipeConfig:
        """Nodes lay out GPUs; a CPU run plans this one host, so `--nodes` would be ignored."""
        nodes = self.devices.nodes
        if nodes > 1 and self.resources.gpus == 0:
            raise ValueError(
                f"devices.nodes = {nodes} (--nodes) spreads GPUs over nodes, but "
                "resources.gpus is 0 (a CPU run on this host); give the cluster's GPUs, e.g. "
                f"--gpus {8 * nodes} --nodes {nodes}, or drop --nodes"
            )
        return self

    @property
    def needs_reference(self) -> bool:
        return self.algorithm.needs_reference

    @property
    def reference_role(self) -> Literal["reference", "actor_train"] | None:
        """The role that computes the reference policy's log-probs (the KL penalty of rlvr
        and agentic, DPO's reference), None when none is needed: a `reference` worker
        holding a frozen copy of the model, or, with `train.lora`, actor_train itself with
        its adapters off (no second copy). The planner and the pipelines both read this.
        Distillation's teacher is another model and always its own worker."""
        if self.pipeline == "dpo" or (
            self.pipeline in ("rlvr", "agentic") and self.needs_reference
        ):
            return "actor_train" if self.train.lora is not None else "reference"
        return None

    @property
    def shared_prefix(self) -> bool:
        """Whether the RL forwards and backwards compute each group's prompt once
        (`train.shared_prefix`; by default on for rlvr, where a group is rollout.group_size
        samples of one prompt, and off for agentic and megatron)."""
        if self.train.shared_prefix is not None:
            return self.train.shared_prefix
        return self.pipeline == "rlvr" and self.train.strategy != "megatron"

    @property
    def needs_critic(self) -> bool:
        return self.algorithm.needs_critic

    @model_validator(mode="after")
    def _mix_domains_routed(self) -> RecipeConfig:
        """`data.source: mix` tags prompts by domain; each tag needs a reward route."""
        if self.data.source != "mix":
            return self
        if self.reward.fn != "mix":
            raise ValueError(
                f"data.source is 'mix' but reward.fn is {self.reward.fn!r}; set reward.fn = mix "
                "and reward.routes (one reward per domain)"
            )
        routes = self.reward.routes
        for domain in self.data.mix:
            if domain not in routes and "*" not in routes:
                raise ValueError(
                    f"data.mix.{domain} has no reward: add reward.routes.{domain} "
                    f"(routes now: {', '.join(routes)})"
                )
        return self


# Advantage estimators the agentic pipeline can use on a whole episode (sequence-level).
AGENTIC_ESTIMATORS = ("grpo", "rloo")


def _check_agentic(cfg: RecipeConfig) -> None:
    """The agentic pipeline sizes its batch with agentic.* and has no critic or reward fn."""
    default = RolloutConfig()
    for key in ("batch_size", "group_size"):
        if getattr(cfg.rollout, key) != getattr(default, key):
            where = "groups_per_step" if key == "batch_size" else "group_size"
            raise ValueError(
                f"rollout.{key} does not apply to the agentic pipeline; set agentic.{where} "
                "(episodes per step = agentic.group_size x agentic.groups_per_step)"
            )
    alg = cfg.algorithm
    if alg.advantage not in AGENTIC_ESTIMATORS:
        raise ValueError(
            f"algorithm.advantage = {alg.advantage!r}: the agentic pipeline trains on "
            f"group baselines of episode returns; use one of {', '.join(AGENTIC_ESTIMATORS)} "
            "(agentic.mode=gigpo adds step-level advantages)"
        )
    if cfg.agentic.group_size < 2:
        raise ValueError(
            "agentic.group_size = 1: episode advantages compare the episodes of a group, "
            "so it needs agentic.group_size >= 2"
        )
    if alg.dynamic_sampling or alg.overlong_buffer > 0 or alg.norm_mode == "running":
        raise ValueError(
            "algorithm.dynamic_sampling, overlong_buffer and norm_mode=running apply to the "
            "rlvr pipeline; remove them from an agentic recipe"
        )
    if alg.tis_cap is not None:
        raise ValueError(
            "algorithm.tis_cap corrects rlvr's async rollout (rollout.max_staleness); the "
            "agentic pipeline plays on the current weights, so remove algorithm.tis_cap"
        )
    mini = cfg.train.mini_batch_size
    if mini is not None and cfg.agentic.episodes_per_step % mini:
        raise ValueError(
            f"train.mini_batch_size = {mini} does not divide the episodes per step "
            f"(agentic.group_size x agentic.groups_per_step = {cfg.agentic.episodes_per_step})"
        )

"""The whole recipe: one YAML file validated into a frozen recipe of its pipeline.

`RecipeConfig` is a union discriminated by `pipeline:`; each pipeline's recipe has only the
sections that pipeline reads, so `dpo:` in an rlvr recipe is an unknown key. What a pipeline
can do (GPUs, strategies, engines) is `rollcli.config.capabilities`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, model_validator
from typing_extensions import Self

from rollcli.config.agentic_algorithm import agentic_algorithm_refusal
from rollcli.config.agentic_section import AgenticConfig
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.config.data_section import DataConfig
from rollcli.config.devices_section import DevicesConfig
from rollcli.config.offline_sections import DistillConfig, DPOConfig, SFTConfig
from rollcli.config.pipeline_spec import pipelines_where, spec_of
from rollcli.config.reward_section import RewardConfig
from rollcli.config.sections import (
    CriticConfig,
    ResourcesConfig,
    RolloutConfig,
    RunConfig,
    Section,
    TrainConfig,
)
from rollcli.config.strategy_spec import strategy_spec
from rollcli.config.warmup_section import WarmupConfig

# Advantage estimators that compare samples of the same prompt need at least two of them.
GROUP_ESTIMATORS = ("grpo", "rloo", "reinforce_pp_baseline")


class _Recipe(Section):
    """What every recipe has; each pipeline's recipe adds the sections it reads."""

    name: str
    pipeline: str  # each pipeline's recipe narrows it to its own name (the union's tag)
    description: str = ""
    aliases: list[str] = Field(default_factory=list)  # short names `roll train` accepts
    # the catalogue recipe an alias of this one names on GPUs (config/recipe_scale.py)
    at_scale: str | None = None
    model: str = "smollm2-135m"
    seed: int = 42
    train: TrainConfig = Field(default_factory=TrainConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    devices: DevicesConfig = Field(default_factory=DevicesConfig)
    run: RunConfig = Field(default_factory=RunConfig)

    @model_validator(mode="after")
    def _nodes_need_gpus(self) -> Self:
        """Nodes lay out GPUs; a CPU run plans this one host, so `--nodes` would be ignored."""
        nodes = self.devices.nodes
        if nodes > 1 and self.resources.gpus == 0:
            raise ValueError(
                f"devices.nodes = {nodes} (--nodes) spreads GPUs over nodes, but "
                "resources.gpus is 0 (a CPU run on this host); give the cluster's GPUs, e.g. "
                f"--gpus {8 * nodes} --nodes {nodes}, or drop --nodes"
            )
        return self

    @model_validator(mode="after")
    def _peak_where_perf_is_logged(self) -> Self:
        """Only rlvr and sft log `perf/*` (docs/performance.md): elsewhere the key does nothing."""
        if self.run.peak_flops is not None and not spec_of(self).perf:
            raise ValueError(
                f"run.peak_flops sets the peak that perf/*_mfu divide by, which the "
                f"{self.pipeline} pipeline does not log yet (only "
                f"{', '.join(pipelines_where(perf=True))}); "
                "remove it"
            )
        return self

    @property
    def needs_reference(self) -> bool:
        return False

    @property
    def needs_critic(self) -> bool:
        return False

    def sequence_tokens(self) -> tuple[int, int]:
        """(prompt, response) tokens of the longest sequence one step trains on (the
        planner's sequence length is their sum; sft and distill: all of it prompt)."""
        raise NotImplementedError

    @property
    def shared_prefix(self) -> bool:
        """Whether the RL forwards and backwards compute each group's prompt once
        (`train.shared_prefix`; by default on for rlvr, where a group is rollout.group_size
        samples of one prompt, and off for agentic and megatron)."""
        if self.train.shared_prefix is not None:
            return self.train.shared_prefix
        return spec_of(self).shared_prefix and strategy_spec(self.train.strategy).shared_prefix

    @property
    def reference_role(self) -> Literal["reference", "actor_train"] | None:
        """The role that computes the reference policy's log-probs (the KL penalty of rlvr
        and agentic, DPO's reference), None when none is needed: a `reference` worker
        holding a frozen copy of the model, or, with `train.lora`, actor_train itself with
        its adapters off (no second copy). The planner and the pipelines both read this.
        Distillation's teacher is another model and always its own worker."""
        if self.needs_reference:
            return "actor_train" if self.train.lora is not None else "reference"
        return None


class _RLRecipe(_Recipe):
    """The RL pipelines: an algorithm and a rollout that generates what they train on."""

    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    critic: CriticConfig = Field(default_factory=CriticConfig)  # used by the gae estimator

    @property
    def needs_reference(self) -> bool:
        return self.algorithm.needs_reference

    @property
    def needs_critic(self) -> bool:
        return self.algorithm.needs_critic


class RLVRRecipe(_RLRecipe):
    """`pipeline: rlvr`: prompts, sampled answers, verifiable rewards."""

    pipeline: Literal["rlvr"]
    data: DataConfig = Field(default_factory=DataConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)

    @model_validator(mode="after")
    def _batch_shape(self) -> RLVRRecipe:
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
    def _data_keys_read(self) -> RLVRRecipe:
        return _data_keys_read(self)

    @model_validator(mode="after")
    def _mix_domains_routed(self) -> RLVRRecipe:
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

    def sequence_tokens(self) -> tuple[int, int]:
        return self.data.max_prompt_tokens, self.rollout.max_new_tokens

    @property
    def group_samples(self) -> int:
        """Samples that share a prompt (one group)."""
        return self.rollout.group_size


class AgenticRecipe(_RLRecipe):
    """`pipeline: agentic`: multi-turn episodes in environments (`agentic:`); `rollout:`
    gives the engine and the sampling of each model turn."""

    pipeline: Literal["agentic"]
    agentic: AgenticConfig = Field(default_factory=AgenticConfig)
    warmup: WarmupConfig | None = None  # SFT on scripted episodes before RL

    @model_validator(mode="before")
    @classmethod
    def _no_warmup_steps(cls, data: Any) -> Any:
        """`warmup.steps: 0` is no warm-up, as `warmup: null` says."""
        warmup = data.get("warmup") if isinstance(data, dict) else None
        if isinstance(warmup, dict) and warmup.get("steps") == 0:
            data = {**data, "warmup": None}
        return data

    @model_validator(mode="after")
    def _agentic(self) -> AgenticRecipe:
        _check_agentic(self)
        return self

    def sequence_tokens(self) -> tuple[int, int]:
        """A conversation grows to agentic.max_context_tokens (the engine's KV buffer of a
        turn, a trained row); its first prompt is the env's, here a default prompt's 256
        tokens (the plain prefill of a first turn holds its KV twice: hf_engine_memory)."""
        first = min(DataConfig().max_prompt_tokens, self.agentic.max_context_tokens // 2)
        return first, self.agentic.max_context_tokens - first

    @property
    def group_samples(self) -> int:
        """Episodes that share an env seed (one group)."""
        return self.agentic.group_size


class _OfflineRecipe(_Recipe):
    """sft, dpo, distill: a fixed data set, one optimizer step per `<pipeline>.batch_size`."""

    data: DataConfig = Field(default_factory=DataConfig)

    @model_validator(mode="after")
    def _data_keys_read(self) -> Self:
        return _data_keys_read(self)

    @model_validator(mode="after")
    def _no_mini_batch(self) -> Self:
        if self.train.shared_prefix:
            raise ValueError(
                f"train.shared_prefix applies to the RL pipelines (rlvr, agentic), whose "
                f"rows are prompt + response; {self.pipeline} has no groups of samples "
                "sharing a prompt, so remove it"
            )
        if self.train.mini_batch_size is not None:
            pipeline = self.pipeline
            raise ValueError(
                f"train.mini_batch_size applies to the RL pipelines; {pipeline} takes "
                f"one optimizer step per {pipeline}.batch_size samples, so set that"
            )
        return self


class DPORecipe(_OfflineRecipe):
    """`pipeline: dpo`: preference pairs against a frozen reference."""

    pipeline: Literal["dpo"]
    dpo: DPOConfig = Field(default_factory=DPOConfig)

    @property
    def needs_reference(self) -> bool:
        return True

    def sequence_tokens(self) -> tuple[int, int]:
        return self.data.max_prompt_tokens, self.dpo.max_response_tokens


class SFTRecipe(_OfflineRecipe):
    """`pipeline: sft`; `rollout:` and `reward:` score the held-out greedy answers."""

    pipeline: Literal["sft"]
    sft: SFTConfig = Field(default_factory=SFTConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)

    def sequence_tokens(self) -> tuple[int, int]:
        return self.sft.max_tokens, 0


class DistillRecipe(_OfflineRecipe):
    """`pipeline: distill` (the recipe's model is the teacher); `rollout:` and `reward:`
    generate and score the held-out answers (and the teacher's, in sequence mode)."""

    pipeline: Literal["distill"]
    distill: DistillConfig = Field(default_factory=DistillConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    reward: RewardConfig = Field(default_factory=RewardConfig)

    @model_validator(mode="after")
    def _on_policy(self) -> DistillRecipe:
        if self.distill.mode == "on_policy":
            _check_on_policy(self.rollout)
        return self

    def sequence_tokens(self) -> tuple[int, int]:
        return self.distill.max_tokens, 0


RECIPE_TYPES: dict[str, type[_Recipe]] = {
    "rlvr": RLVRRecipe,
    "agentic": AgenticRecipe,
    "dpo": DPORecipe,
    "sft": SFTRecipe,
    "distill": DistillRecipe,
}
# The recipes of the RL pipelines (rollout, algorithm, critic): `isinstance(cfg, RLRecipe)`
# narrows a recipe where the pipeline's spec row says it has them.
RLRecipe = RLVRRecipe | AgenticRecipe
# A recipe, typed by its `pipeline:`: the keys of another pipeline's sections are unknown.
RecipeConfig = Annotated[
    RLVRRecipe | AgenticRecipe | DPORecipe | SFTRecipe | DistillRecipe,
    Field(discriminator="pipeline"),
]


def rollout_of(cfg: RecipeConfig) -> RolloutConfig:
    """`cfg.rollout`, typed: every pipeline but dpo has the section (read where the spec row
    says the pipeline samples); a dpo recipe fails as `cfg.rollout` would."""
    if isinstance(cfg, DPORecipe):
        raise AttributeError("'DPORecipe' object has no attribute 'rollout'")
    return cfg.rollout


_WithData = TypeVar("_WithData", bound=RLVRRecipe | _OfflineRecipe)


def _data_keys_read(cfg: _WithData) -> _WithData:
    """A data key the recipe's pipeline does not read is refused (`pipeline_problem`)."""
    problem = cfg.data.pipeline_problem(cfg.pipeline)
    if problem:
        raise ValueError(problem)
    return cfg


# What the student's own sampling in on-policy distillation reads from `rollout`.
ON_POLICY_ROLLOUT_KEYS = ("max_new_tokens", "temperature", "top_p", "top_k", "val_max_new_tokens")


def _check_on_policy(rollout: RolloutConfig) -> None:
    """On-policy distillation samples one answer per prompt with the student's own weights
    (no inference engine): the other rollout keys do not apply."""
    default = RolloutConfig()
    for key in RolloutConfig.model_fields:
        if key not in ON_POLICY_ROLLOUT_KEYS and getattr(rollout, key) != getattr(default, key):
            raise ValueError(
                f"rollout.{key} does not apply to distill.mode=on_policy (the student samples "
                "one answer per prompt with its own weights; distill.batch_size prompts per "
                f"step); remove it (rollout keys that apply: {', '.join(ON_POLICY_ROLLOUT_KEYS)})"
            )


def _check_agentic(cfg: AgenticRecipe) -> None:
    """The agentic pipeline sizes its batch with agentic.*, and some algorithm keys cannot
    apply to it (`agentic_algorithm_refusal`)."""
    default = RolloutConfig()
    for key in ("batch_size", "group_size"):
        if getattr(cfg.rollout, key) != getattr(default, key):
            where = "groups_per_step" if key == "batch_size" else "group_size"
            raise ValueError(
                f"rollout.{key} does not apply to the agentic pipeline; set agentic.{where} "
                "(episodes per step = agentic.group_size x agentic.groups_per_step)"
            )
    refusal = agentic_algorithm_refusal(cfg.algorithm)
    if refusal is not None:
        raise ValueError(refusal)
    if cfg.agentic.group_size < 2:
        raise ValueError(
            "agentic.group_size = 1: episode advantages compare the episodes of a group, "
            "so it needs agentic.group_size >= 2"
        )
    _check_warmup(cfg)
    mini = cfg.train.mini_batch_size
    if mini is not None and cfg.agentic.episodes_per_step % mini:
        raise ValueError(
            f"train.mini_batch_size = {mini} does not divide the episodes per step "
            f"(agentic.group_size x agentic.groups_per_step = {cfg.agentic.episodes_per_step})"
        )


def _check_warmup(cfg: AgenticRecipe) -> None:
    warmup = cfg.warmup
    if warmup is None:
        return
    if warmup.data is not None:  # the file's rows: its size is checked when it is read
        return
    if warmup.val_episodes >= warmup.episodes:
        raise ValueError(
            f"warmup.val_episodes = {warmup.val_episodes} leaves no training episodes of "
            f"warmup.episodes = {warmup.episodes}; lower it or raise warmup.episodes"
        )
    if warmup.episodes > cfg.agentic.val_seed:
        raise ValueError(
            f"warmup.episodes = {warmup.episodes} would reach the validation seeds "
            f"(agentic.val_seed = {cfg.agentic.val_seed}); lower it"
        )
    if cfg.train.lora is not None:
        raise ValueError(
            "warmup: with train.lora the warm-up would train adapters the RL run does not "
            "load; run it as its own `roll train sft` on `roll data episodes` and pass "
            "--model SFT_RUN_ID instead (docs/agentic.md)"
        )

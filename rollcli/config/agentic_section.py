"""The `agentic` section of a recipe: environments, episodes and their advantages
(`pipeline: agentic`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rollcli.config.sections import NonNegInt, PositiveInt, Section
from rollcli.config.val_env_section import ValEnvConfig

# env arguments the agentic pipeline sets itself, and what to set instead
PIPELINE_ENV_KEYS = {
    key: f"set agentic.{key}, not agentic.env_kwargs.{key} (the pipeline passes it)"
    for key in ("format_penalty", "shaping", "no_effect_feedback", "no_effect_penalty")
} | {
    "shaping_gamma": "agentic.env_kwargs.shaping_gamma is the run's discount, passed by the "
    "pipeline (1 under starpo, agentic.step_gamma under gigpo); leave it out",
    "layouts": "agentic.env_kwargs.layouts is set by the pipeline (training episodes draw "
    "training layouts, validation episodes validation layouts); leave it out",
}


AGENT_TASK_KEYS = ("tasks", "task_kwargs")


AGENT_REFUSED = (
    "reply_prefix",
    "user_suffix",
    "format_penalty",
    "shaping",
    "no_effect_feedback",
    "no_effect_penalty",
)


class AgenticConfig(Section):
    """Multi-turn agentic RL (`pipeline: agentic`): environments, episodes, advantages.

    Each step plays `groups_per_step` groups of `group_size` episodes; the episodes of a
    group share an env seed (the same level / map / goal), so their returns form a group
    baseline. `mode: starpo` trains one sample per episode on its group-normalised return;
    `mode: gigpo` adds step-level advantages of actions taken from identical states (Feng et
    al. 2025). `rollout.max_new_tokens` is the budget of one model turn; `rollout.temperature`
    and friends are the sampling settings of training episodes (validation is greedy).
    """

    env: str = "frozenlake"
    env_kwargs: dict[str, Any] = Field(default_factory=dict)  # e.g. {size: 4, max_steps: 8}
    val_env_kwargs: dict[str, Any] = Field(default_factory=dict)  # overrides for validation
    group_size: PositiveInt = 4  # episodes per env seed
    groups_per_step: PositiveInt = 4
    max_turns: PositiveInt = 6  # model turns per episode (and the env's own max_steps)
    max_context_tokens: PositiveInt = 1536  # whole conversation; a longer episode is cut
    mode: Literal["starpo", "gigpo"] = "starpo"
    step_advantage_weight: Annotated[float, Field(ge=0)] = 1.0  # GiGPO's omega
    step_gamma: Annotated[float, Field(ge=0, le=1)] = 0.95  # GiGPO's discount of step returns
    # StarPO-S: train on this fraction of the step's groups, those whose returns spread most;
    # below 1 a group whose episodes all scored the same is never trained on (1 = keep all)
    keep_top_groups: Annotated[float, Field(gt=0, le=1)] = 1.0
    format_penalty: Annotated[float, Field(le=0)] = -0.1  # reward of an unparsable reply
    # text that opens every assistant turn (part of the prompt, never trained), e.g.
    # "<answer>": a small model then only has to name the action; the env parses prefix + reply
    reply_prefix: str = ""
    user_suffix: str = ""  # appended to every observation, e.g. "Your move?" (a reminder)
    num_env_workers: PositiveInt = 2
    val_episodes: PositiveInt = 32
    val_seed: NonNegInt = 1_000_000  # validation seeds are val_seed, val_seed + 1, ...
    # a second env validation also plays, reported as `val/<name>/*` (val_env_section.py)
    val_env: ValEnvConfig | None = None
    # environments that teach (docs/agentic.md): potential-based progress shaping, and a line
    # in the next observation (and optionally a penalty) after a move that changed nothing
    shaping: Literal["none", "progress"] = "none"
    no_effect_feedback: bool = False
    no_effect_penalty: Annotated[float, Field(le=0)] = 0.0
    # the hf engine keeps each episode's KV between its turns, so a turn prefills only its
    # new tokens; this bounds that memory (least recently used dropped first; 0: every turn
    # prefills the whole conversation). vllm and sglang cache prefixes by themselves.
    turn_cache_mib: Annotated[float, Field(ge=0)] = 1024.0
    # an agent program, "package.module:function" of (openai client, task) -> reward, plays
    # the episodes through roll's OpenAI-compatible endpoint instead of the env's turn loop;
    # the tasks come from the tool env's task source (docs/agents.md)
    agent: str | None = None
    agent_timeout_s: Annotated[float, Field(gt=0)] = 300.0  # a program silent this long is dropped
    # stop the run when more than this fraction of a step's turns would not re-render (the
    # replies as sampled) to the ids the model was prompted with (`agentic/template_drift`,
    # rollcli/rollout/template_audit.py); None: never
    max_template_drift: Annotated[float, Field(ge=0, le=1)] | None = None

    @model_validator(mode="after")
    def _agent_program(self) -> AgenticConfig:
        if self.agent is None:
            if self.agent_timeout_s != type(self).model_fields["agent_timeout_s"].default:
                raise ValueError("agentic.agent_timeout_s applies only with agentic.agent")
            return self
        from rollcli.config.agent_extra import require_agent_extra

        require_agent_extra()
        if ":" not in self.agent:  # that it imports: rollcli/launch/plugin_check.py
            raise ValueError(
                f"agentic.agent = {self.agent!r}: name the program as 'package.module:function' "
                "or 'path/to/file.py:function'"
            )
        if self.env != "tool":
            raise ValueError(
                "agentic.agent takes its tasks from the tool env's task source: set "
                "agentic.env: tool (and agentic.env_kwargs.tasks)"
            )
        for kwargs in (self.env_kwargs, self.val_env_kwargs):
            other = sorted(set(kwargs) - set(AGENT_TASK_KEYS))
            if other:
                raise ValueError(
                    f"agentic.env_kwargs.{other[0]} does not apply with agentic.agent: the "
                    f"program calls its own tools and scores its answers (only "
                    f"{' and '.join(AGENT_TASK_KEYS)} choose its tasks)"
                )
        fields = type(self).model_fields
        env_only = [k for k in AGENT_REFUSED if getattr(self, k) != fields[k].default]
        if env_only:
            raise ValueError(
                f"agentic.{env_only[0]} does not apply with agentic.agent: the program writes "
                "the whole conversation and returns the episode's reward"
            )
        if self.val_env is not None:
            raise ValueError(
                "agentic.val_env does not apply with agentic.agent: the program plays the tool "
                "env's tasks only; leave agentic.val_env out"
            )
        if self.mode != "starpo":
            raise ValueError(
                "agentic.mode: gigpo groups the env's states, which an agent program does not "
                "report; with agentic.agent the mode is starpo"
            )
        return self

    @model_validator(mode="after")
    def _pipeline_env_keys(self) -> AgenticConfig:
        """env_kwargs leave out what the pipeline passes (whether the env is registered and
        takes the rest is checked before anything starts, rollcli/launch/plugin_check.py)."""
        cross = self.val_env.env_kwargs if self.val_env is not None else {}
        for key in PIPELINE_ENV_KEYS:
            if key in self.env_kwargs or key in self.val_env_kwargs:
                raise ValueError(PIPELINE_ENV_KEYS[key])
            if key in cross:
                raise ValueError(PIPELINE_ENV_KEYS[key].replace("env_kwargs", "val_env.env_kwargs"))
        return self

    @property
    def episodes_per_step(self) -> int:
        return self.group_size * self.groups_per_step

    def scale_line(self, max_new_tokens: int) -> str:
        """What a step and a validation play, for `roll plan` and `--dry-run`.

        >>> AgenticConfig(env="sokoban", groups_per_step=128, group_size=8, max_turns=20,
        ...     max_context_tokens=8192).scale_line(32)
        'agentic: 1024 sokoban episodes a step (128 groups x 8), up to 20 actions of 32 new tokens in 8192 tokens; validation: 32 sokoban episodes'
        """
        val = f"{self.val_episodes} {self.env} episodes"
        if self.val_env is not None:
            n = self.val_env.episodes or self.val_episodes
            val += f" + {n} {self.val_env.env} episodes (val/{self.val_env.label}/*)"
        return (
            f"agentic: {self.episodes_per_step} {self.env} episodes a step "
            f"({self.groups_per_step} groups x {self.group_size}), up to {self.max_turns} "
            f"actions of {max_new_tokens} new tokens in {self.max_context_tokens} tokens; "
            f"validation: {val}"
        )

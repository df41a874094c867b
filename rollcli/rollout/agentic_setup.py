"""From the recipe's `agentic:` section to the flat arguments of env workers and the
scheduler; shared by the agentic pipeline and `roll eval`, so both play the same episodes."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from rollcli.config.agentic_section import AgenticConfig
from rollcli.config.errors import ConfigError
from rollcli.config.strategy_spec import ENGINES
from rollcli.envs.registry import env_factory
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import EpisodeSpec, Limits

if TYPE_CHECKING:
    from rollcli.rollout.agent_episodes import AgentPrograms


def env_kwargs(agentic: AgenticConfig, validation: bool = False) -> dict[str, Any]:
    """The env's keyword arguments: `env_kwargs` (+ `val_env_kwargs` for validation), the
    format penalty, `max_steps = max_turns` unless the recipe sets it, the teaching options
    that are on, and the layout split (`train` or `validation`) where the env can split."""
    kwargs = {"max_steps": agentic.max_turns, **agentic.env_kwargs}
    if validation:
        kwargs.update(agentic.val_env_kwargs)
    return _with_pipeline_keys(agentic, agentic.env, kwargs, validation)


def cross_env_kwargs(agentic: AgenticConfig) -> dict[str, Any]:
    """The keyword arguments of `agentic.val_env`, the second validation env: its own
    `env_kwargs` with the same pipeline keys as the training env's validation (format
    penalty, `max_steps = max_turns` unless set, teaching options, the validation layouts)."""
    assert agentic.val_env is not None
    kwargs = {"max_steps": agentic.max_turns, **agentic.val_env.env_kwargs}
    return _with_pipeline_keys(agentic, agentic.val_env.env, kwargs, validation=True)


def _with_pipeline_keys(
    agentic: AgenticConfig, env: str, kwargs: dict[str, Any], validation: bool
) -> dict[str, Any]:
    """`kwargs` with what the pipeline passes `env`; a teaching option the recipe turned on
    that `env` does not take is an error."""
    kwargs["format_penalty"] = agentic.format_penalty
    teach: dict[str, Any] = {}
    if agentic.shaping != "none":
        teach.update(shaping=agentic.shaping, shaping_gamma=shaping_gamma(agentic))
    if agentic.no_effect_feedback:
        teach["no_effect_feedback"] = True
    if agentic.no_effect_penalty:
        teach["no_effect_penalty"] = agentic.no_effect_penalty
    takes, open_kwargs = env_parameters(env)
    for key in teach:
        if key not in takes and not open_kwargs:
            option = "shaping" if key == "shaping_gamma" else key
            takers = ", ".join(envs_taking(key))
            raise ConfigError(
                f"agentic.{option} applies to environments that take it ({takers}); "
                f"{env!r} does not: leave agentic.{option} at its default"
            )
    kwargs.update(teach)
    if "layouts" in takes:
        kwargs["layouts"] = "validation" if validation else "train"
    return kwargs


def agent_programs(agentic: AgenticConfig, tokenizer: Any, model: str) -> AgentPrograms:
    """`agentic.agent` with its endpoint started and the tool env's task source (training
    tasks from `env_kwargs`, validation tasks with `val_env_kwargs` over them)."""
    from rollcli.rollout.agent_episodes import AgentPrograms

    assert agentic.agent is not None
    return AgentPrograms(
        agentic.agent,
        tokenizer,
        train_tasks=dict(agentic.env_kwargs),
        val_tasks={**agentic.env_kwargs, **agentic.val_env_kwargs},
        model=model,
        timeout_s=agentic.agent_timeout_s,
    )


def turn_cache_mib(agentic: AgenticConfig, engine: str) -> float:
    """The hf engine's memory for episodes' KV kept between turns; 0 for vllm and sglang,
    which cache prefixes by themselves (setting the key for them is an error)."""
    if ENGINES[engine].turn_cache:  # hf
        return agentic.turn_cache_mib
    if "turn_cache_mib" in agentic.model_fields_set:
        raise ConfigError(
            f"agentic.turn_cache_mib applies to the hf engine; the {engine} engine caches "
            "prefixes by itself: leave agentic.turn_cache_mib unset"
        )
    return 0.0


def shaping_gamma(agentic: AgenticConfig) -> float:
    """The discount of progress shaping: the run's discount of step rewards, 1 under starpo
    (an episode's return is the plain sum) and `agentic.step_gamma` under gigpo."""
    return agentic.step_gamma if agentic.mode == "gigpo" else 1.0


def envs_taking(key: str) -> list[str]:
    """The registered environments whose factory names `key` among its arguments."""
    from rollcli.envs.registry import env_names

    return [name for name in env_names() if key in env_parameters(name)[0]]


def env_parameters(env: str) -> tuple[set[str], bool]:
    """The named keyword arguments of `env`'s factory, and whether it takes **kwargs (then a
    teaching key the recipe sets is passed on; `layouts` is passed only where it is named)."""
    import inspect

    params = inspect.signature(env_factory(env)).parameters.values()
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return {p.name for p in params}, open_kwargs


def host_turn_format(tokenizer: Any, host: Any, agentic: AgenticConfig) -> TurnFormat:
    """The chat format of episodes played on env workers (`host`: one of them; its env's
    instructions and tools), with the recipe's reply prefix and user suffix."""
    return TurnFormat(
        tokenizer, host.instructions(), agentic.reply_prefix, agentic.user_suffix, host.tools()
    )


def limits(agentic: AgenticConfig, max_new_tokens: int, model_context: int | None = None) -> Limits:
    """Turn and token limits; the context is capped at the model's own (`model_context`)."""
    context = agentic.max_context_tokens
    if model_context:
        context = min(context, model_context)
    return Limits(agentic.max_turns, context, max_new_tokens)


def train_specs(agentic: AgenticConfig, seed: int, step: int) -> list[EpisodeSpec]:
    """Step `step`'s episodes: `groups_per_step` groups of `group_size` sharing a seed.
    Seeds are drawn below `val_seed` (validation uses `val_seed` and up): never shared."""
    rng = random.Random(seed * 1_000_003 + step)
    specs: list[EpisodeSpec] = []
    for g in range(agentic.groups_per_step):
        env_seed = rng.randrange(agentic.val_seed)
        for _ in range(agentic.group_size):
            specs.append(EpisodeSpec(len(specs), g, env_seed))
    return specs


def val_specs(first_seed: int, n: int) -> list[EpisodeSpec]:
    """`n` episodes with seeds `first_seed, first_seed + 1, ...` (a group each)."""
    return [EpisodeSpec(i, i, first_seed + i) for i in range(n)]


def model_context(model_path: str | None) -> int | None:
    """The model's longest sequence (`max_position_embeddings`), if its config says."""
    if model_path is None:
        return None
    from transformers import AutoConfig

    return getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", None)

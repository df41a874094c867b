"""`roll eval`: play episodes of an environment with a model (or the random or expert
baseline) and
report success with a Wilson interval, action quality and length, and one transcript.

It plays with the agentic pipeline's own scheduler, prompts, parsing and env workers
(`play_episodes`), in this process without Ray: env workers and the model worker are
plain objects whose calls run at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rollcli.config.agentic_section import AgenticConfig
from rollcli.config.errors import ConfigError
from rollcli.evaluation.stats import wilson_interval
from rollcli.rollout.agentic_setup import (
    agent_programs,
    env_kwargs,
    host_turn_format,
    limits,
    model_context,
    turn_cache_mib,
    val_specs,
)
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits
from rollcli.rollout.episode_metrics import episode_metrics
from rollcli.rollout.episode_scheduler import (
    ModelPolicy,
    ScriptedPolicy,
    expert_policy,
    has_expert,
    play_episodes,
    random_policy,
)
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.env_worker import EnvArgs, EnvWorker

RANDOM = "random"
EXPERT = "expert"
SCRIPTED = (RANDOM, EXPERT)  # baselines without a model: `--model random|expert`


@dataclass
class EvalResult:
    env: str
    model: str
    episodes: list[Episode]
    metrics: dict[str, float]
    temperature: float = 0.0

    def summary(self) -> dict[str, Any]:
        m = self.metrics
        n = len(self.episodes)
        wins = sum(ep.success for ep in self.episodes)
        low, high = wilson_interval(wins, n)
        return {
            "env": self.env,
            "model": self.model,
            "episodes": n,
            "temperature": self.temperature,
            "success_rate": wins / max(n, 1),
            "success_ci95": [low, high],
            "mean_reward": m["eval/return_mean"],
            "valid_action_rate": m["eval/valid_action_rate"],
            "effective_action_rate": m["eval/effective_action_rate"],
            "mean_steps": m["eval/mean_steps"],
            "env_errors": int(m["eval/env_errors"]),
            **self.tool_summary(),
        }

    def tool_summary(self) -> dict[str, Any]:
        """A tool env's calls per episode, the share of calls that ran and the errors by
        kind; nothing for other envs."""
        m = self.metrics
        if "eval/tool_calls" not in m:
            return {}
        kinds = {k.rsplit("/", 1)[1]: int(v) for k, v in m.items() if "/tool_error/" in k}
        return {
            "tool_calls_per_episode": m["eval/tool_calls_per_episode"],
            "tool_call_valid": m["eval/tool_call_valid"],
            "tool_errors": int(m["eval/tool_errors"]),
            "tool_error_kinds": kinds,
        }

    def rows(self) -> list[dict[str, Any]]:
        """Each episode's outcome, for `--json`."""
        return [
            {
                "seed": ep.spec.seed,
                "success": ep.success,
                "steps": ep.turns,
                "return": ep.episode_return,
                "end": ep.end,
                "error": ep.error,
            }
            for ep in self.episodes
        ]


def evaluate(
    agentic: AgenticConfig,
    model: str,
    model_path: str | None,
    *,
    n: int,
    seed: int,
    max_new_tokens: int,
    temperature: float = 0.0,
    num_threads: int = 1,
    tokenizer_path: str | None = None,
    on_progress: Any = None,
) -> EvalResult:
    """`n` validation-split episodes (seeds `seed, seed + 1, ...`) with `model`: a model
    folder (`model_path`), `"random"` (a uniformly random legal action each turn) or
    `"expert"` (the env's own solver, as the warm-up's demonstrations play).

    The recipe's `no_effect_penalty` is left out (its note stays), so the mean reward is the
    env's own: WebShop's purchase reward. With the random baseline there is no model, and
    prompts are built with `tokenizer_path`'s chat template only to keep the episode
    bookkeeping identical; so with the expert.
    """
    from rollcli.strategies.hf_model import load_tokenizer

    if agentic.agent is not None and model in SCRIPTED:
        raise ValueError(
            "an agent program's episodes need a model to talk to: evaluate a model or run "
            f"(--model {model} plays the built-in envs)"
        )
    kwargs = env_kwargs(agentic, validation=True)
    kwargs.pop("no_effect_penalty", None)  # a training term: report the env's own reward
    hosts = [EnvWorker(EnvArgs(agentic.env, kwargs))]
    if model == EXPERT and not has_expert(hosts[0].probe):
        raise ConfigError(
            f"--model expert: environment {agentic.env!r} has no expert (expert_action or "
            "expert_reply); evaluate a model or --model random"
        )
    if model in SCRIPTED:
        policy: ModelPolicy | ScriptedPolicy = (
            random_policy(seed, agentic.reply_prefix)
            if model == RANDOM
            else expert_policy(hosts, agentic.reply_prefix)
        )
        chat_template = tokenizer_path or model_path
        if chat_template is None:
            raise ValueError(
                f"the {model} baseline builds its prompts with a tokenizer: pass tokenizer_path"
            )
        tokenizer = load_tokenizer(chat_template)
    else:
        from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

        assert model_path is not None
        worker = ActorInferWorker(
            ActorInferArgs(
                model_path,
                num_threads=num_threads,
                seed=seed,
                engine="hf",
                session_mib=turn_cache_mib(agentic, "hf"),
            )
        )
        tokenizer = worker.tokenizer
        params = SamplingParams(
            n=1, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed
        )
        policy = ModelPolicy([worker], params, sessions=turn_cache_mib(agentic, "hf") > 0)
    fmt = host_turn_format(tokenizer, hosts[0], agentic)
    turn_limits = limits(agentic, max_new_tokens, model_context(model_path))
    if agentic.agent is not None:  # the recipe's agent program, through the endpoint
        assert isinstance(policy, ModelPolicy)
        specs = val_specs(seed, n)
        episodes = _agent_episodes(
            agentic, tokenizer, model, policy, specs, turn_limits, on_progress
        )
    else:
        episodes, _ = play_episodes(
            hosts, policy, val_specs(seed, n), fmt, turn_limits, on_progress
        )
    metrics = episode_metrics(episodes, "eval")
    return EvalResult(agentic.env, model, episodes, metrics, temperature)


def _agent_episodes(
    agentic: AgenticConfig,
    tokenizer: Any,
    model: str,
    policy: ModelPolicy,
    specs: list[EpisodeSpec],
    turn_limits: Limits,
    on_progress: Any,
) -> list[Episode]:
    """Validation tasks `specs` played by `agentic.agent` against the endpoint."""
    programs = agent_programs(agentic, tokenizer, model)
    try:
        episodes, _ = programs.play(policy, specs, True, turn_limits, on_progress)
    finally:
        programs.server.stop()
    return episodes


def render_episode(ep: Episode) -> str:
    """A transcript for the terminal: each observation, reply and step outcome."""
    lines = [
        f"seed {ep.spec.seed}: {ep.turns} turns, return {ep.episode_return:g}, "
        f"{'success' if ep.success else 'no success'} ({ep.end})"
    ]
    if ep.error:
        lines.append(f"env error: {ep.error}")
    turn = 0
    for msg in ep.messages[1:]:
        if msg["role"] == "user":
            lines.append(f"── observation\n{msg['content']}")
        else:
            info = ep.infos[turn] if turn < len(ep.infos) else {}
            turn += 1
            verdict = "valid" if info.get("action_is_valid") else "invalid"
            lines.append(
                f"── reply {turn} ({verdict}, action {info.get('action')}): {msg['content'].strip()}"
            )
    return "\n".join(lines)

"""The agentic rollout source: multi-turn episodes in text environments (StarPO / GiGPO).

Step `n` plays `groups_per_step` groups of `group_size` episodes (a group shares an env
seed) on the env workers against actor_infer, turns the finished episodes into one batch
(`episode_batch.episodes_to_batch`), keeps the groups worth training on
(`agentic.keep_top_groups`, StarPO-S) and, under `agentic.mode: gigpo`, adds GiGPO's
step-level term for the advantage stage. Training seeds and sampling seeds are a function
of the run seed and the step, and episodes are generated for in lockstep rounds
(`play_episodes`), so a resumed run plays the uninterrupted run's episodes.

Async (`rollout.max_staleness = k > 0`): when step n's episodes are in, the episodes of steps
n+1 .. n+k not yet started are played in a background thread while step n trains, on the
weights the engine holds (those after step n-1); the weight sync after step n waits for
them, so which weights play which step does not depend on timing (a step's episodes are
at most k updates old; `algorithm.off_policy` reweights them against the sampler's
log-probs). A checkpoint saves the episodes played ahead, so a resumed run repeats the
uninterrupted one exactly.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.config.errors import ConfigError
from rollcli.config.recipe import AgenticRecipe
from rollcli.data.batch_keys import RESPONSE_MASK
from rollcli.distributed.cluster import Cluster
from rollcli.envs.registry import build_env
from rollcli.evaluation.stats import wilson_interval
from rollcli.pipelines.rl.episode_batch import (
    DRIVER_FIELDS,
    episodes_to_batch,
    keep_informative_groups,
    set_step_advantages,
)
from rollcli.pipelines.rl.source import step_sampling
from rollcli.rollout.agentic_setup import (
    agent_programs,
    cross_env_kwargs,
    env_kwargs,
    limits,
    model_context,
    train_specs,
    turn_cache_mib,
    val_specs,
)
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec
from rollcli.rollout.episode_metrics import action_fractions, episode_metrics, summary_line
from rollcli.rollout.episode_scheduler import ModelPolicy, play_episodes
from rollcli.rollout.result import RolloutResult
from rollcli.rollout.template_audit import template_drift
from rollcli.runs.checkpoint import load_tensors_file
from rollcli.runtime.run_control import RunControl
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.env_worker import env_tools, system_prompt

if TYPE_CHECKING:
    from rollcli.runtime.workers_setup import Clusters

AHEAD_FILE = "episodes_ahead.pt"  # async mode: played episodes of the steps after it


class EpisodeSource:
    flop_account = False  # env turns are forwarded but not counted as responses

    def __init__(self, cfg: AgenticRecipe, ctl: RunControl, model_path: str, engine: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.model_path = model_path
        ag = cfg.agentic
        self.group_size = ag.group_size
        self.batch_size = ag.episodes_per_step
        self.turn_cache_mib = turn_cache_mib(ag, engine)
        # async mode: episodes played ahead of their step (step -> playing or played)
        self.ahead: dict[int, Future | RolloutResult] = {}
        self.pool = ThreadPoolExecutor(1, "episodes-ahead") if cfg.rollout.max_staleness else None

    def load(self, tokenizer: Any) -> None:
        ag = self.cfg.agentic
        self.ctl.ui.phase("building environments")
        probe = _build_checked(ag.env, env_kwargs(ag))
        _build_checked(ag.env, env_kwargs(ag, validation=True), "agentic.val_env_kwargs")
        self.pad_id = tokenizer.pad_token_id
        self.fmt = TurnFormat(
            tokenizer, system_prompt(probe), ag.reply_prefix, ag.user_suffix, env_tools(probe)
        )
        self.limits = limits(ag, self.cfg.rollout.max_new_tokens, model_context(self.model_path))
        if ag.agent is not None:
            self.agent = agent_programs(ag, tokenizer, self.cfg.model)
        if ag.val_env is not None:  # the second validation env: its own rules and symbols
            cross = _build_checked(ag.val_env.env, cross_env_kwargs(ag), "agentic.val_env")
            self.cross_fmt = TurnFormat(
                tokenizer, system_prompt(cross), ag.reply_prefix, ag.user_suffix, env_tools(cross)
            )

    def describe(self) -> str:
        ag = self.cfg.agentic
        cross = ""
        if ag.val_env is not None:
            cross = f" + {_cross_episodes(ag)} on {ag.val_env.env}{_named(ag)}"
        return (
            f"env {ag.env} ({ag.num_env_workers} env workers), mode {ag.mode}, "
            f"{ag.groups_per_step} groups x {ag.group_size} episodes per step, "
            f"{ag.val_episodes} validation episodes{cross}"
        )

    def attach(self, clusters: Clusters, version: int) -> None:
        self.infer = clusters.actor_infer
        self.envs, self.val_envs = clusters["env"], clusters["env_val"]
        self.cross_envs = clusters.get("env_cross")  # agentic.val_env's workers, or None
        self.ahead = {}  # episodes of the workers just replaced are gone

    def before_sync(self, version: int) -> None:
        self.finish_ahead()  # on the weights they started with

    def finish_ahead(self) -> None:
        """Async mode: wait for the episodes being played ahead of their step."""
        self.ahead = {step: _done(pending) for step, pending in sorted(self.ahead.items())}

    # ---- the rollout -------------------------------------------------------------------
    def rollout(self, step: int) -> RolloutResult:
        """The step's episodes (async: played ahead), then those of the next
        `max_staleness` steps started in the background."""
        cfg, ag = self.cfg, self.cfg.agentic
        self.ctl.phase("generate")
        self.ctl.ui.phase(f"playing {ag.episodes_per_step} {ag.env} episodes")
        pending = self.ahead.pop(step, None)
        result = _done(pending) if pending is not None else self._rollout(step, 0)
        for later in range(step + 1, min(step + cfg.rollout.max_staleness, cfg.train.steps) + 1):
            if later not in self.ahead:  # played on the weights after step - 1
                self.ahead[later] = self.pool.submit(self._rollout, later, later - step)
        if result.batch is None:
            self.ctl.run.log_event(f"step {step}: every group's episodes scored alike; no update")
        return result

    def _rollout(self, step: int, staleness: int) -> RolloutResult:
        """Play step `step`'s episodes → the batch of the groups worth training on (None: no
        group's episodes differ in return), with GiGPO's step term under `mode: gigpo`.
        `staleness`: how many updates older than step `step`'s the weights playing are (> 0:
        played ahead in the background thread, which shows no progress)."""
        cfg, ag = self.cfg, self.cfg.agentic
        t0 = time.perf_counter()
        specs = train_specs(ag, cfg.seed, step)
        episodes, sched = self.play(specs, self.envs, self.sampling(step), live=staleness == 0)
        metrics: dict[str, Any] = {"time/rollout_s": time.perf_counter() - t0}
        metrics["rollout/staleness"] = float(staleness)
        metrics.update(episode_metrics(episodes, "env"))
        metrics["reward/mean"] = metrics["env/return_mean"]
        if ag.agent is None:  # the agent path audits its conversations itself
            sched.update(template_drift((ep, self.fmt) for ep in episodes))
        metrics.update({k if "/" in k else f"rollout/{k}": v for k, v in sched.items()})
        self._check_drift(step, metrics.get("agentic/template_drift"))
        if refused := metrics.get("agentic/endpoint_refused"):  # someone else posted
            self.ctl.run.log_event(
                f"warning: step {step}: the agent endpoint refused {refused:.0f} request(s) "
                "without the run's key (401)"
            )
        metrics.update(action_fractions(episodes))
        batch = episodes_to_batch(episodes, self.pad_id, self.fmt)
        model_tokens = batch[RESPONSE_MASK].sum(dim=1)
        metrics["response_length/mean"] = float(model_tokens.mean())
        metrics["rollout/context_tokens_mean"] = float(
            batch["attention_mask"].sum(1).float().mean()
        )
        metrics["rollout/tokens_per_s"] = float(model_tokens.sum()) / max(
            metrics["time/rollout_s"], 1e-9
        )
        batch, kept = keep_informative_groups(batch, ag.keep_top_groups)
        metrics.update(kept)
        trained = set(batch["group"]) if batch is not None else set()
        rows = [ep.record(ag.env) | {"trained": ep.spec.group in trained} for ep in episodes]
        if batch is not None:
            set_step_advantages(
                batch, ag.mode, ag.step_advantage_weight, ag.step_gamma, cfg.algorithm.norm_std
            )
            for key in DRIVER_FIELDS:
                batch.fields.pop(key)  # the source's; the trainer needs none of them
        return RolloutResult(batch, rows, metrics, summary=summary_line(metrics, "env"))

    def _check_drift(self, step: int, drift: float | None) -> None:
        """`agentic.max_template_drift`: stop the run (with a checkpoint) above it."""
        limit = self.cfg.agentic.max_template_drift
        if limit is None or drift is None or drift <= limit:
            return
        self.ctl.run.log_event(
            f"warning: template drift {drift:.3f} at step {step} is above "
            f"agentic.max_template_drift = {limit}: the chat template renders these "
            "conversations otherwise than the turns the model was trained in (docs/agents.md)"
        )
        self.ctl.request_stop()

    def play(
        self,
        specs: list[EpisodeSpec],
        envs: Cluster,
        params: SamplingParams,
        live: bool = True,
        fmt: TurnFormat | None = None,
    ) -> tuple[list[Episode], dict[str, float]]:
        policy = ModelPolicy(self.infer.workers, params, sessions=self.turn_cache_mib > 0)
        progress = self.ctl.ui.generation if live else None
        if self.cfg.agentic.agent is not None:
            return self.agent.play(policy, specs, envs is self.val_envs, self.limits, progress)
        return play_episodes(
            envs.workers,
            policy,
            specs,
            fmt or self.fmt,
            self.limits,
            on_progress=progress,
        )

    def sampling(self, step: int) -> SamplingParams:
        return step_sampling(self.cfg.rollout, self.cfg.seed, step, n=1)

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> dict[str, float]:
        """Greedy episodes on the validation seeds (the same ones every time); with
        `agentic.val_env` also on the second env, its metrics under `val/<name>/`."""
        ag = self.cfg.agentic
        t0 = time.perf_counter()
        params = SamplingParams(
            n=1, max_new_tokens=self.cfg.rollout.max_new_tokens, temperature=0.0
        )
        episodes, _ = self.play(val_specs(ag.val_seed, ag.val_episodes), self.val_envs, params)
        metrics = _validation_metrics(episodes, "val")
        if ag.val_env is not None:
            specs = val_specs(ag.val_seed, _cross_episodes(ag))
            cross, _ = self.play(specs, self.cross_envs, params, fmt=self.cross_fmt)
            metrics.update(_validation_metrics(cross, f"val/{ag.val_env.label}"))
        metrics["time/validate_s"] = time.perf_counter() - t0
        self.ctl.run.log_event(
            f"validation: {summary_line(metrics, 'val')} on {len(episodes)} {ag.env} episodes (greedy)"
        )
        if ag.val_env is not None:
            prefix = f"val/{ag.val_env.label}"
            self.ctl.run.log_event(
                f"validation: {summary_line(metrics, prefix)} on {len(cross)} "
                f"{ag.val_env.env} episodes{_named(ag)} (greedy)"
            )
        return metrics

    # ---- checkpoints: a step's episodes are a function of the seed, the step and the
    # weights; async mode saves those already played for later steps -------------------
    def state_dict(self) -> dict[str, Any]:
        return {}

    def files(self) -> dict[str, Any] | None:
        self.finish_ahead()
        ahead = {step: result.to_plain() for step, result in self.ahead.items()}
        return {AHEAD_FILE: ahead} if ahead else None

    def load_state_dict(self, state: dict[str, Any] | None, checkpoint: Path | None) -> None:
        self.ahead = {}
        ahead = checkpoint / AHEAD_FILE if checkpoint is not None else None
        if ahead is not None and ahead.exists():
            saved = load_tensors_file(ahead)
            self.ahead = {step: RolloutResult.from_plain(r) for step, r in saved.items()}


def _validation_metrics(episodes: list[Episode], prefix: str) -> dict[str, float]:
    """`episode_metrics` under `prefix` and the success rate as `<prefix>/accuracy` (what the
    display, summary and best checkpoint read), with its 95% interval and n."""
    metrics = episode_metrics(episodes, prefix)
    metrics[f"{prefix}/accuracy"] = metrics[f"{prefix}/success_rate"]
    low, high = wilson_interval(sum(ep.success for ep in episodes), len(episodes))
    metrics.update({f"{prefix}/accuracy_ci_low": low, f"{prefix}/accuracy_ci_high": high})
    metrics[f"{prefix}/n"] = float(len(episodes))
    return metrics


def _cross_episodes(ag: Any) -> int:
    """The episodes `agentic.val_env` plays (default: as many as the training env's)."""
    return ag.val_env.episodes or ag.val_episodes


def _named(ag: Any) -> str:
    """` (NAME)` where `agentic.val_env` has a name of its own (`sokoban-large`), else ""."""
    return f" ({ag.val_env.label})" if ag.val_env.label != ag.val_env.env else ""


def _done(pending: Future | RolloutResult) -> RolloutResult:
    return pending.result() if isinstance(pending, Future) else pending


def _build_checked(env: str, kwargs: dict[str, Any], where: str = "agentic.env_kwargs") -> Any:
    """Build the env once on the driver, so bad kwargs fail before any worker starts."""
    try:
        return build_env(env, kwargs)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{where}: environment {env!r} rejects {kwargs}: {exc}") from exc

"""The agentic pipeline: multi-turn RL on text environments (StarPO / GiGPO).

play episodes (env workers + actor_infer, asynchronously) → episodes to a batch → the
groups worth training on (`agentic.keep_top_groups`) → reference / old log-probs → advantages (episode, and step-level for GiGPO) → train →
sync weights; the driver loop (`driver.drive`) validates, logs and checkpoints.

Bookkeeping around the loop (stop rules, checkpoints with every process's RNG, restarting
dead workers) is `RunControl`'s. Training seeds and sampling seeds are a function of the
run seed and the step, and episodes are generated for in lockstep rounds (`play_episodes`),
so a resumed run plays the uninterrupted run's episodes and ends with its weights exactly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.recipe import RecipeConfig
from rollcli.distributed import weight_sync
from rollcli.distributed.cluster import Cluster
from rollcli.evaluation.stats import wilson_interval
from rollcli.pipelines.advantage_stage import make_kl_controller
from rollcli.pipelines.agentic_batch import (
    DRIVER_FIELDS,
    add_agentic_advantages,
    episodes_to_batch,
    keep_informative_groups,
)
from rollcli.pipelines.agentic_metrics import action_fractions, episode_metrics, summary_line
from rollcli.pipelines.agentic_setup import (
    env_kwargs,
    limits,
    model_context,
    train_specs,
    turn_cache_mib,
    val_specs,
)
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.run_control import RunControl
from rollcli.pipelines.workers_setup import Placement, build_clusters
from rollcli.planning.role_table import roles_for
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec
from rollcli.rollout.episode_scheduler import ModelPolicy, play_episodes
from rollcli.strategies.hf_infer import SamplingParams
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.infer_engines import resolve_engine
from rollcli.workers.env_worker import build_env, system_prompt
from rollcli.workers.policy_loss_args import PolicyUpdateArgs


class AgenticPipeline:
    def __init__(self, cfg: RecipeConfig, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.model_path = model_path
        self.engine = resolve_engine(cfg.rollout.engine)
        self.turn_cache_mib = turn_cache_mib(cfg.agentic, self.engine)

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, ag = self.cfg, self.cfg.agentic
        self.ctl.ui.phase("building environments")
        probe = _build_checked(ag.env, env_kwargs(ag))
        _build_checked(ag.env, env_kwargs(ag, validation=True), "agentic.val_env_kwargs")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        self.fmt = TurnFormat(tokenizer, system_prompt(probe), ag.reply_prefix, ag.user_suffix)
        self.limits = limits(ag, cfg.rollout.max_new_tokens, model_context(self.model_path))
        self.start_workers()
        alg = cfg.algorithm
        self.update_args = PolicyUpdateArgs.from_recipe(cfg)
        on_policy = alg.ppo_epochs == 1 and cfg.train.mini_batch_size in (
            None,
            ag.episodes_per_step,
        )
        # KL in the reward compares the sampling policy with the reference, as in rlvr
        self.needs_old_logprobs = not on_policy or (cfg.needs_reference and alg.kl_in == "reward")
        self._fresh_driver_state()
        self.run.log_event(
            f"workers ready: env {ag.env} ({ag.num_env_workers} env workers), mode {ag.mode}, "
            f"{ag.groups_per_step} groups x {ag.group_size} episodes per step, "
            f"{ag.val_episodes} validation episodes"
        )

    def _fresh_driver_state(self) -> None:
        alg = self.cfg.algorithm
        self.kl_ctl = make_kl_controller(alg)
        self.running = RunningMeanStd() if alg.norm_mode == "running" else None

    def start_workers(self) -> None:
        self.ctl.ui.phase("starting workers")
        clusters = build_clusters(
            self.cfg, roles_for(self.cfg), Placement.build(self.cfg), model_path=self.model_path
        )
        self.actor, self.infer = clusters["actor_train"], clusters["actor_infer"]
        self.envs, self.val_envs = clusters["env"], clusters["env_val"]
        self.reference = clusters.reference
        self.ctl.started(clusters.all())
        weight_sync.link(self.actor, self.infer)

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        return self.validate()

    def step(self, step: int) -> StepResult:
        """1. play → batch (→ the informative groups) → 2. log-probs → 3. advantages →
        4. update → 5. sync; with no informative group, no update (stages 2-5 skipped)."""
        cfg, ag = self.cfg, self.cfg.agentic
        metrics: dict[str, Any] = {"step": step}

        # 1. play the step's episodes (groups share a seed)
        self.ctl.phase("generate")
        self.ctl.ui.phase(f"playing {ag.episodes_per_step} {ag.env} episodes")
        t0 = time.perf_counter()
        episodes, sched = self.play(train_specs(ag, cfg.seed, step), self.envs, self.sampling(step))
        metrics["time/rollout_s"] = time.perf_counter() - t0
        metrics.update(episode_metrics(episodes, "env"))
        metrics["reward/mean"] = metrics["env/return_mean"]
        metrics.update({f"rollout/{k}": v for k, v in sched.items()})
        metrics.update(action_fractions(episodes))
        batch = episodes_to_batch(episodes, self.pad_id, self.fmt)
        model_tokens = batch["response_mask"].sum(dim=1)
        metrics["response_length/mean"] = float(model_tokens.mean())
        metrics["rollout/context_tokens_mean"] = float(
            batch["attention_mask"].sum(1).float().mean()
        )
        metrics["rollout/tokens_per_s"] = float(model_tokens.sum()) / max(
            metrics["time/rollout_s"], 1e-9
        )
        # keep the groups worth training on (agentic.keep_top_groups, StarPO-S)
        batch, kept = keep_informative_groups(batch, ag.keep_top_groups)
        metrics.update(kept)
        trained = set(batch["group"]) if batch is not None else set()
        rows = [ep.record(ag.env) | {"trained": ep.spec.group in trained} for ep in episodes]
        if batch is None:
            self.run.log_event(f"step {step}: every group's episodes scored alike; no update")
            return StepResult(metrics, rows, summary_line(metrics, "env"))

        # 2. reference and old log-probs
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        sizes = self.update_args.forward_sizes()
        if self.reference is not None:
            batch.set("ref_logprobs", self.reference.call("compute_logprobs", batch, **sizes)[0])
        elif cfg.reference_role == "actor_train":  # LoRA: the policy with its adapters off
            batch.set("ref_logprobs", self.actor.call("compute_ref_logprobs", batch, **sizes)[0])
        if self.needs_old_logprobs:
            batch.set("old_logprobs", self.actor.call("compute_logprobs", batch, **sizes)[0])
        metrics["time/forward_s"] = time.perf_counter() - t0

        # 3. advantages: rlvr's stage on episode returns (+ GiGPO's step groups)
        metrics.update(
            add_agentic_advantages(
                cfg.algorithm,
                batch,
                mode=ag.mode,
                max_new_tokens=cfg.rollout.max_new_tokens,
                kl_ctl=self.kl_ctl,
                running=self.running,
                step_weight=ag.step_advantage_weight,
                step_gamma=ag.step_gamma,
            )
        )
        for key in DRIVER_FIELDS:
            batch.fields.pop(key)  # the driver's; the trainer needs none of them

        # 4. update the policy
        self.ctl.phase("train")
        t0 = time.perf_counter()
        actor = self.actor.call("train_step", batch, self.update_args)[0]
        if "action_entropy" in actor:  # the sampling policy's, on-policy
            metrics["agentic/first_action_entropy"] = actor.pop("action_entropy")
        metrics.update({f"actor/{k}": v for k, v in actor.items()})
        metrics["time/train_s"] = time.perf_counter() - t0

        # 5. new weights to the inference engine
        self.ctl.phase("sync")
        metrics["time/weight_sync_s"] = self.sync_weights()
        return StepResult(metrics, rows, summary_line(metrics, "env"))

    def play(
        self, specs: list[EpisodeSpec], envs: Cluster, params: SamplingParams
    ) -> tuple[list[Episode], dict[str, float]]:
        return play_episodes(
            envs.workers,
            ModelPolicy(self.infer.workers, params, sessions=self.turn_cache_mib > 0),
            specs,
            self.fmt,
            self.limits,
            on_progress=self.ctl.ui.generation,
        )

    def sampling(self, step: int) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(
            n=1,
            max_new_tokens=r.max_new_tokens,
            temperature=r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            seed=self.cfg.seed * 100_003 + step,
        )

    def sync_weights(self) -> float:
        import ray

        t0 = time.perf_counter()
        refs = self.actor.call_async("broadcast_weights")
        refs += self.infer.call_async("receive_weights")
        ray.get(refs)
        return time.perf_counter() - t0

    def validate(self) -> dict[str, float]:
        """Greedy episodes on the validation seeds (the same ones every time)."""
        ag = self.cfg.agentic
        self.ctl.phase("validate")
        t0 = time.perf_counter()
        params = SamplingParams(
            n=1, max_new_tokens=self.cfg.rollout.max_new_tokens, temperature=0.0
        )
        episodes, _ = self.play(val_specs(ag.val_seed, ag.val_episodes), self.val_envs, params)
        metrics = episode_metrics(episodes, "val")
        metrics["val/accuracy"] = metrics["val/success_rate"]  # what the display and summary show
        low, high = wilson_interval(sum(ep.success for ep in episodes), len(episodes))
        metrics.update({"val/accuracy_ci_low": low, "val/accuracy_ci_high": high})
        metrics["val/n"] = float(len(episodes))
        metrics["time/validate_s"] = time.perf_counter() - t0
        self.run.log_event(
            f"validation: {summary_line(metrics, 'val')} on {len(episodes)} {ag.env} episodes (greedy)"
        )
        return metrics

    # ---- checkpoints -----------------------------------------------------------------
    def checkpoint(self, step: int) -> None:
        state = {
            "kl_controller": self.kl_ctl.state_dict(),
            "running_norm": self.running.state_dict() if self.running else None,
        }
        self.ctl.checkpoint(step, state)

    def restore(self, checkpoint: Path | None) -> int:
        state = self.ctl.restore(checkpoint)
        self._fresh_driver_state()
        if state is None:
            return 0
        if "kl_controller" in state:  # older checkpoints kept no driver state
            self.kl_ctl.load_state_dict(state["kl_controller"])
        if self.running is not None and state.get("running_norm") is not None:
            self.running.load_state_dict(state["running_norm"])
        self.sync_weights()
        return int(state["step"])


def _build_checked(env: str, kwargs: dict[str, Any], where: str = "agentic.env_kwargs") -> Any:
    """Build the env once on the driver, so bad kwargs fail before any worker starts."""
    from rollcli.config.errors import ConfigError

    try:
        return build_env(env, kwargs)
    except (TypeError, ValueError, KeyError) as exc:
        raise ConfigError(f"{where}: environment {env!r} rejects {kwargs}: {exc}") from exc

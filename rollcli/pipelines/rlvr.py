"""The RLVR pipeline: one readable step.

generate → reward → reference / old log-probs / values → advantages → train actor
(and critic) → sync weights; the driver loop (`driver.drive`) validates, logs and
checkpoints.

Generation and reward go through the prompt scheduler (`rollcli.rollout.prompt_scheduler`).
With `rollout.max_staleness = k > 0` the rollouts of the next k steps are already running while
a step trains (async mode): they use weights up to k steps old, which the truncated
importance weights (`algorithm.tis_cap`) correct for.

`restore` loads a checkpoint into fresh workers and the driver (resume, and recovery when a
worker dies); everything a later step depends on is in the checkpoint, so a resumed run
repeats the uninterrupted one exactly.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.recipe import RecipeConfig
from rollcli.data.batch import Batch
from rollcli.data.prompts import Prompt
from rollcli.data.sampler import PromptSampler
from rollcli.distributed import data_parallel, weight_sync
from rollcli.evaluation.rlvr_eval import is_correct
from rollcli.evaluation.stats import wilson_interval
from rollcli.pipelines.advantage_stage import add_advantages, make_kl_controller
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.reward_health import check_reward_errors
from rollcli.pipelines.rlvr_data import load_prompt_sets, tokenize_prompts
from rollcli.pipelines.run_control import RunControl
from rollcli.pipelines.workers_setup import Placement, build_clusters
from rollcli.planning.role_table import roles_for
from rollcli.rollout.prompt_scheduler import (
    PendingRollout,
    RolloutScheduler,
    SchedulerOptions,
    sample_fields,
)
from rollcli.rollout.result import RolloutResult
from rollcli.runs.checkpoint import load_tensors_file
from rollcli.strategies.hf_infer import SamplingParams
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.infer_engines import resolve_engine
from rollcli.tracking.step_perf import RLStepWork, RunPerf, rollout_groups
from rollcli.workers.policy_loss_args import PolicyUpdateArgs

AHEAD_FILE = "rollouts_ahead.pt"  # async mode: finished rollouts of the steps after it


class RLVRPipeline:
    def __init__(self, cfg: RecipeConfig, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.ui = ctl.ui
        self.model_path = model_path
        self.clusters = None
        self.placement: Placement | None = None  # the run's plan and where workers go
        # the engine sleeps while training runs on the GPU it shares (set by the plan)
        self.engine_sleeps = False
        self.engine = resolve_engine(cfg.rollout.engine)
        # async mode: rollouts started ahead of their step (step -> pending or finished)
        self.ahead: dict[int, PendingRollout | RolloutResult] = {}

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        self.ui.phase("loading data")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        self.train_prompts, self.val_prompts = load_prompt_sets(cfg.data, cfg.seed)
        self.train_ids = tokenize_prompts(tokenizer, self.train_prompts, cfg.data.max_prompt_tokens)
        self.val_ids = tokenize_prompts(tokenizer, self.val_prompts, cfg.data.max_prompt_tokens)
        self._fresh_driver_state()
        self.start_workers()
        alg, train = cfg.algorithm, cfg.train
        self.update_args = replace(PolicyUpdateArgs.from_recipe(cfg), tis_cap=alg.tis_cap)
        on_policy = alg.ppo_epochs == 1 and train.mini_batch_size in (None, cfg.rollout.batch_size)
        self.needs_old_logprobs = not on_policy or (cfg.needs_reference and alg.kl_in == "reward")
        if cfg.rollout.max_staleness and alg.tis_cap is None:
            self.run.log_event(
                f"async rollout (rollout.max_staleness={cfg.rollout.max_staleness}) without "
                "algorithm.tis_cap: samples from older weights are not reweighted"
            )
        threads = max(w.threads or 1 for w in self.placement.plan.workers)
        self.perf = RunPerf.start(
            self.run, self.model_path, cfg.run.peak_flops, self.clusters.actor_train
        )
        if cfg.resources.gpus > 0:
            train_gpus = self.clusters.actor_train.world_size
            self.perf.devices = {
                "generate": self.clusters.actor_infer.world_size,
                "forward": train_gpus,
                "train": train_gpus,
            }
        self.work = RLStepWork(
            reference=cfg.reference_role in ("reference", "actor_train"),
            old_logprobs=self.needs_old_logprobs,
            critic=cfg.needs_critic,
            epochs=alg.ppo_epochs,
            shared_prefix=self.update_args.shared_prefix,
            lora=train.lora is not None,
        )
        self.run.log_event(
            f"workers ready: engine={self.engine}, {threads} threads per colocated role, "
            f"{len(self.train_prompts)} train / {len(self.val_prompts)} validation prompts"
        )

    def _fresh_driver_state(self) -> None:
        cfg = self.cfg
        self.sampler = PromptSampler(len(self.train_prompts), cfg.seed)
        self.kl_ctl = make_kl_controller(cfg.algorithm)
        self.running = RunningMeanStd() if cfg.algorithm.norm_mode == "running" else None

    def _place(self) -> None:
        """The run's plan (the one `roll plan` prints and `roll train` checked), its worker
        arguments and, on GPUs, its placement groups. Made again when workers restart."""
        if self.placement is not None:
            self.placement.remove()
        self.placement = Placement.build(self.cfg)
        infer = self.placement.args["actor_infer"]
        self.engine = infer["engine"]
        # the engine sleeps while training runs on the GPU it shares
        self.engine_sleeps = bool((infer["engine_kwargs"] or {}).get("sleep_mode"))

    def start_workers(self) -> None:
        self.ui.phase("starting workers")
        self._place()
        self.clusters = build_clusters(
            self.cfg, roles_for(self.cfg), self.placement, model_path=self.model_path
        )
        backend, address = weight_sync.link(self.clusters.actor_train, self.clusters.actor_infer)
        where = " (placement from the run's GPU plan)" if self.placement.devices is not None else ""
        self.run.log_event(f"weight sync over {backend} at {address}{where}")
        if self.clusters.train_group:
            self.run.log_event(f"data-parallel actor_train group at {self.clusters.train_group}")
        if self.placement.spread is not None:
            self.run.log_event(f"worker nodes: {self._worker_nodes()}")
        self.ctl.started(self.clusters.all())
        self.scheduler = RolloutScheduler(
            self.clusters.actor_infer, self.clusters.reward, self.pad_id, self.draw
        )
        self.scheduler.version = self.ctl.current_step
        self.ahead = {}  # rollouts of the workers just replaced are gone

    def _worker_nodes(self) -> str:
        """`role: ip/id ...` for each heavy role's ranks (events.log: where the run went)."""
        parts = []
        for c in self.clusters.all():
            if c.name != "reward":
                nodes = c.call("node")
                parts.append(f"{c.name}: " + ", ".join(f"{n['ip']}/{n['id'][:8]}" for n in nodes))
        return "; ".join(parts)

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        return self.validate()

    def step(self, step: int) -> StepResult:
        """1. generate and reward → 2. reference / old log-probs / values → 3. advantages →
        4. update → 5. sync → 6. FLOP account; returns the step's metrics and its samples."""
        cfg = self.cfg
        metrics: dict[str, Any] = {"step": step}

        # 1. generate n samples per prompt and score them
        rollout = self.rollout(step)
        check_reward_errors(cfg.reward.fn, rollout.rows, step, self.run.log_event)
        batch = self.even_batch(rollout.batch)
        metrics.update(rollout.metrics)

        # 2. reference log-probs, old log-probs, values
        if self.engine_sleeps:  # its GPU memory goes to the training roles until the sync
            t0 = time.perf_counter()
            self.clusters.actor_infer.call("sleep")
            metrics["time/engine_sleep_s"] = time.perf_counter() - t0
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        mb = cfg.train.micro_batch_size
        sizes = self.update_args.forward_sizes()
        if self.clusters.reference is not None:
            batch.set(
                "ref_logprobs", self.clusters.reference.dispatch("compute_logprobs", batch, **sizes)
            )
        elif cfg.reference_role == "actor_train":  # LoRA: the policy with its adapters off
            batch.set(
                "ref_logprobs",
                self.clusters.actor_train.dispatch("compute_ref_logprobs", batch, **sizes),
            )
        if self.needs_old_logprobs:
            batch.set(
                "old_logprobs",
                self.clusters.actor_train.dispatch("compute_logprobs", batch, **sizes),
            )
        if self.clusters.critic is not None:
            batch.set(
                "values",
                self.clusters.critic.dispatch(
                    "compute_values",
                    batch,
                    micro_batch_size=mb,
                    shared_prefix=self.update_args.shared_prefix,
                ),
            )
        metrics["time/forward_s"] = time.perf_counter() - t0

        # 3. advantages (driver, pure functions)
        metrics.update(
            add_advantages(
                cfg.algorithm,
                batch,
                group_size=cfg.rollout.group_size,
                max_new_tokens=cfg.rollout.max_new_tokens,
                kl_ctl=self.kl_ctl,
                running=self.running,
            )
        )

        # 4. update the policy (and the critic)
        self.ctl.phase("train")
        t0 = time.perf_counter()
        actor = self.train_actor(batch)
        metrics.update({f"actor/{k}": v for k, v in actor.items()})
        if self.clusters.critic is not None:
            critic = self.clusters.critic.call(
                "train_step",
                batch,
                value_clip=cfg.algorithm.value_clip,
                micro_batch_size=mb,
                mini_batch_size=cfg.train.mini_batch_size,
                epochs=cfg.algorithm.ppo_epochs,
                shared_prefix=self.update_args.shared_prefix,
            )[0]
            metrics.update({f"critic/{k}": v for k, v in critic.items()})
        metrics["time/train_s"] = time.perf_counter() - t0

        # 5. send the new weights to the inference engine (after the requests already sent)
        self.ctl.phase("sync")
        if self.engine_sleeps:
            t0 = time.perf_counter()
            self.clusters.actor_infer.call("wake")
            metrics["time/engine_wake_s"] = time.perf_counter() - t0
        metrics["time/weight_sync_s"] = self.sync_weights(version=step)

        # 6. the FLOP account: each phase's useful FLOPs over its time x the peak (perf/*)
        flops = self.work.flops(self.perf.model, rollout_groups(batch))
        metrics.update(self.perf.step_metrics(flops, metrics))
        return StepResult(metrics, rollout.rows)

    # ---- pieces of a step ------------------------------------------------------------
    def even_batch(self, batch: Batch) -> Batch:
        """Data parallel: every rank gets the same number of rows (ZeRO-3's gathers are
        collective), so a short dynamic-sampling batch drops its last groups until its rows
        split evenly over the N ranks."""
        n = self.clusters.actor_train.world_size
        unit = math.lcm(n, self.cfg.rollout.group_size)
        extra = len(batch) % unit
        if n == 1 or not extra or extra == len(batch):
            return batch
        self.run.log_event(f"step: {extra} row(s) dropped to split the batch over {n} ranks")
        return batch.slice(0, len(batch) - extra)

    def train_actor(self, batch: Batch) -> dict[str, float]:
        """The policy update; with N data-parallel ranks each gets its share of every
        mini-batch (`data_parallel.shard_order`) and the metrics are averaged over ranks."""
        train = self.clusters.actor_train
        n = train.world_size
        if n == 1:
            return train.call("train_step", batch, self.update_args)[0]
        order = data_parallel.shard_order(len(batch), self.update_args.mini_batch_size, n)
        per_rank = train.dispatch("train_step", batch.select(order), args=self.update_args)
        return data_parallel.mean_metrics(per_rank)

    def draw(self, num_prompts: int) -> tuple[list[Prompt], list[list[int]]]:
        """The next prompts from the seeded sampler (and their token ids)."""
        indices = self.sampler.next_indices(num_prompts)
        return [self.train_prompts[i] for i in indices], [self.train_ids[i] for i in indices]

    def rollout(self, step: int) -> RolloutResult:
        """The step's scored samples. Async mode: this step's rollout was started up to
        `max_staleness` steps earlier; the rollouts of the steps after it are started now,
        before this one trains."""
        pending = self.ahead.pop(step, None) or self._start_rollout(step)
        ahead = min(step + self.cfg.rollout.max_staleness, self.cfg.train.steps)
        result = self._collect(pending)
        for later in range(step + 1, ahead + 1):
            if later not in self.ahead:
                self.ahead[later] = self._start_rollout(later)
        return result

    def _start_rollout(self, step: int) -> PendingRollout:
        cfg = self.cfg
        return self.scheduler.start(
            self.sampling(step),
            SchedulerOptions(
                group_size=cfg.rollout.group_size,
                num_groups=cfg.rollout.prompts_per_step,
                request_groups=cfg.rollout.request_groups,
                dynamic_sampling=cfg.algorithm.dynamic_sampling,
                oversample=cfg.rollout.oversample,
                max_resample_rounds=cfg.algorithm.max_resample_rounds,
            ),
        )

    def _collect(self, pending: PendingRollout | RolloutResult) -> RolloutResult:
        if isinstance(pending, RolloutResult):  # finished earlier (restored from a checkpoint)
            return pending
        return pending.result(self.ui.generation, self.ctl.phase)

    def sampling(self, step: int) -> SamplingParams:
        r = self.cfg.rollout
        return SamplingParams(
            n=r.group_size,
            max_new_tokens=r.max_new_tokens,
            temperature=r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            seed=self.cfg.seed * 100_003 + step,
        )

    def sync_weights(self, version: int) -> float:
        """Send actor_train's weights (those after step `version`) to actor_infer."""
        import ray

        self.scheduler.version = version
        t0 = time.perf_counter()
        refs = self.clusters.actor_train.call_async("broadcast_weights")
        refs += self.clusters.actor_infer.call_async("receive_weights")
        ray.get(refs)
        return time.perf_counter() - t0

    def validate(self) -> dict[str, float]:
        from rollcli.rollout.generate import generate, score

        self.ctl.phase("validate")
        r = self.cfg.rollout
        params = SamplingParams(
            n=1, max_new_tokens=r.val_max_new_tokens or r.max_new_tokens, temperature=0.0
        )
        t0 = time.perf_counter()
        gens = generate(self.clusters.actor_infer, self.val_ids, params, self.ui.generation)
        samples = [
            {**sample_fields(self.val_prompts[g.prompt_index]), "response": g.text} for g in gens
        ]
        results = score(self.clusters.reward, samples)
        right = sum(is_correct(res) for res in results)
        accuracy = right / len(results)
        low, high = wilson_interval(right, len(results))
        self.run.log_event(
            f"validation: accuracy {accuracy:.3f} (95% CI {low:.3f}-{high:.3f}) on "
            f"{len(results)} held-out prompts (greedy)"
        )
        return {
            "val/accuracy": accuracy,
            "val/accuracy_ci_low": low,
            "val/accuracy_ci_high": high,
            "val/n": float(len(results)),
            "val/reward_mean": sum(res["score"] for res in results) / len(results),
            "val/response_length": sum(len(g.token_ids) for g in gens) / len(gens),
            "time/validate_s": time.perf_counter() - t0,
        }

    # ---- checkpoints -------------------------------------------------------------------
    def _stateful(self) -> list:
        """The clusters whose state (optimizer, scheduler, ...) a checkpoint holds."""
        return [c for c in (self.clusters.actor_train, self.clusters.critic) if c is not None]

    def checkpoint(self, step: int) -> None:
        state = {
            "sampler": self.sampler.state_dict(),
            "kl_controller": self.kl_ctl.state_dict(),
            "running_norm": self.running.state_dict() if self.running else None,
        }
        # async mode: the rollouts already started for later steps, finished now and saved
        self.ahead = {k: self._collect(v) for k, v in sorted(self.ahead.items())}
        ahead = {step: result.to_plain() for step, result in self.ahead.items()}
        files = {AHEAD_FILE: ahead} if ahead else None
        self.ctl.checkpoint(step, state, stateful=self._stateful(), driver_files=files)

    def restore(self, checkpoint: Path | None) -> int:
        """Load `checkpoint` (None: the start) into the freshly started workers and the
        driver, rewind the run folder to it; returns its step."""
        state = self.ctl.restore(checkpoint, stateful=self._stateful())
        if state is None:
            self._fresh_driver_state()
            return 0
        self.sampler.load_state_dict(state["sampler"])
        self.kl_ctl.load_state_dict(state["kl_controller"])
        if self.running is not None and state["running_norm"] is not None:
            self.running.load_state_dict(state["running_norm"])
        ahead = checkpoint / AHEAD_FILE
        saved = load_tensors_file(ahead) if ahead.exists() else {}
        self.ahead = {step: RolloutResult.from_plain(r) for step, r in saved.items()}
        self.sync_weights(version=int(state["step"]))
        return int(state["step"])

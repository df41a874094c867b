"""The RL pipeline, `pipeline: rlvr` and `pipeline: agentic`: one readable step.

rollout (the source's: prompts + rule rewards, or episodes in environments) → reference /
old log-probs / values → advantages → train actor (and critic) → sync weights (→ FLOP
account); the driver loop (`driver.drive`) validates, logs and checkpoints.

The two sources (`prompts.PromptSource`, `episodes.EpisodeSource`) hand the step the same
`RolloutResult`; everything after it is this module's, so every `algorithm:` key, the
critic, data-parallel training, GPU placement and exact resume mean the same for both.

`restore` loads a checkpoint into fresh workers and the driver (resume, and recovery when a
worker dies); everything a later step depends on is in the checkpoint, so a resumed run
repeats the uninterrupted one exactly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.engines import resolve_engine
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import AgenticRecipe, RLRecipe, RLVRRecipe
from rollcli.config.roles import ACTOR_TRAIN
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import OLD_LOGPROBS, OLD_ROUTED_EXPERTS, REF_LOGPROBS, VALUES
from rollcli.distributed import data_parallel, weight_sync
from rollcli.distributed.process_control import ProcessControl
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.rl.advantages import add_advantages, make_kl_controller
from rollcli.pipelines.rl.source import RolloutSource
from rollcli.pipelines.rl.sync_verify import verified_sync
from rollcli.pipelines.rl.update_args import update_args
from rollcli.planning.role_table import names, roles_for
from rollcli.runtime.run_control import RunControl
from rollcli.runtime.workers_setup import Clusters, Placement, build_clusters
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.tracking.step_perf import RLStepWork, RunPerf, rollout_groups
from rollcli.workers.actor_infer import ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.critic import CriticWorker
from rollcli.workers.reference import ReferenceWorker


def make_source(cfg: RLRecipe, ctl: RunControl, model_path: str, engine: str) -> RolloutSource:
    if spec_of(cfg).plays_episodes:
        from rollcli.pipelines.rl.episodes import EpisodeSource

        assert isinstance(cfg, AgenticRecipe)  # the spec's episodes pipeline
        return EpisodeSource(cfg, ctl, model_path, engine)
    from rollcli.pipelines.rl.prompts import PromptSource

    assert isinstance(cfg, RLVRRecipe)  # the spec's prompts pipeline
    return PromptSource(cfg, ctl)


# `router-noise@generate:N`: gaussian noise of this many times each token's router-logit
# spread (tiny-random-moe: ~40% of token x layer top-2 sets change)
ROUTER_NOISE = 1.0


class RLPipeline:
    def __init__(self, cfg: RLRecipe, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.ui = ctl.ui
        self.model_path = model_path
        self.clusters: Clusters | None = None  # start_workers (in setup) builds them
        self.placement: Placement | None = None  # the run's plan and where workers go
        # the engine sleeps while training runs on the GPU it shares (set by the plan)
        self.engine_sleeps = False
        self.engine = resolve_engine(cfg.rollout.engine, on_gpu=cfg.resources.gpus > 0)
        self.source = make_source(cfg, ctl, model_path, self.engine)

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, alg = self.cfg, self.cfg.algorithm
        self.source.load(load_tokenizer(self.model_path))
        self._fresh_driver_state()
        self.start_workers()
        self.update_args = update_args(cfg)
        on_policy = alg.ppo_epochs == 1 and cfg.train.mini_batch_size in (
            None,
            self.source.batch_size,
        )
        # KL in the reward compares the sampling policy with the reference
        self.needs_old_logprobs = not on_policy or (cfg.needs_reference and alg.kl_in_reward)
        threads = max(w.threads or 1 for w in self.placement.plan.workers)
        self.perf = None
        if self.source.flop_account:
            train = self.clusters.actor_train
            self.perf = RunPerf.start(
                self.run,
                self.model_path,
                cfg.run.peak_flops,
                lambda: train.call_rank(0, ActorTrainWorker.matmul_peak),
            )
            if cfg.resources.gpus > 0:
                train_gpus = self.clusters.actor_train.world_size
                self.perf.devices = {
                    "generate": self.clusters.actor_infer.world_size,
                    "forward": train_gpus,
                    "train": train_gpus,
                }
            self.work = RLStepWork(
                reference=cfg.reference_role is not None,
                old_logprobs=self.needs_old_logprobs,
                critic=cfg.needs_critic,
                epochs=alg.ppo_epochs,
                shared_prefix=self.update_args.shared_prefix,
                lora=cfg.train.lora is not None,
            )
        self.run.log_event(
            f"workers ready: engine={self.engine}, {threads} threads per colocated role, "
            + self.source.describe()
        )

    def _fresh_driver_state(self) -> None:
        alg = self.cfg.algorithm
        self.kl_ctl = make_kl_controller(alg)
        self.running = RunningMeanStd() if alg.norm_mode == "running" else None

    def _place(self) -> None:
        """The run's plan (`ctl.plan`: the one `roll plan` prints and `roll train` checked),
        its worker arguments and, on GPUs, its placement groups, made again (from the same
        plan) when workers restart."""
        if self.placement is not None:
            self.placement.remove()
        self.placement = Placement.build(self.cfg, self.ctl.plan)
        infer = self.placement.planned.infer
        assert infer is not None, "an RL plan has actor_infer"
        self.engine = infer.engine
        self.engine_sleeps = infer.sleeps  # while training runs on the GPU it shares

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
        self.source.attach(self.clusters, version=self.ctl.current_step)

    def _worker_nodes(self) -> str:
        """`role: ip/id ...` for each heavy role's ranks (events.log: where the run went)."""
        parts = []
        for c in self.clusters.all():
            if c.name in names("none"):  # no model: reward and env workers
                continue
            nodes = c.call(ProcessControl.node)
            parts.append(f"{c.name}: " + ", ".join(f"{n['ip']}/{n['id'][:8]}" for n in nodes))
        return "; ".join(parts)

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        return self.validate()

    def step(self, step: int) -> StepResult:
        """1. rollout (the source's) → 2. reference / old log-probs / values → 3. advantages
        → 4. update → 5. sync → 6. FLOP account; with nothing worth training on (every
        group scored alike), no update: stages 2-6 are skipped."""
        cfg = self.cfg
        metrics: dict[str, Any] = {"step": step}

        # 1. the rollout: scored samples (prompts) or played episodes
        noise = self.ctl.faults.take("router-noise", "generate", step)
        if noise:  # a fault injected on purpose: the engine's experts perturbed (faults.py)
            self.clusters.actor_infer.call(ActorInferWorker.set_router_noise, ROUTER_NOISE, step)
        rollout = self.source.rollout(step)
        if noise:
            self.clusters.actor_infer.call(ActorInferWorker.set_router_noise, 0.0)
        metrics.update(rollout.metrics)
        if rollout.batch is None:
            return StepResult(metrics, rollout.rows, rollout.summary)
        batch, even = self.even_batch(rollout.batch)
        metrics.update(even)

        # 2. reference log-probs, old log-probs, values
        if self.engine_sleeps:  # its GPU memory goes to the training roles until the sync
            t0 = time.perf_counter()
            self.clusters.actor_infer.call(ActorInferWorker.sleep)
            metrics["time/engine_sleep_s"] = time.perf_counter() - t0
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        self.forward(batch)
        metrics["time/forward_s"] = time.perf_counter() - t0

        # 3. advantages (driver, pure functions)
        metrics.update(
            add_advantages(
                cfg.algorithm,
                batch,
                group_size=self.source.group_size,
                max_new_tokens=cfg.rollout.max_new_tokens,
                kl_ctl=self.kl_ctl,
                running=self.running,
            )
        )

        # 4. update the policy (and the critic)
        self.ctl.phase("train")
        t0 = time.perf_counter()
        actor = self.train_actor(batch)
        if "action_entropy" in actor:  # episodes: the sampling policy's, on the first action
            metrics["agentic/first_action_entropy"] = actor.pop("action_entropy")
        # the sampler-vs-trainer gap is the rollout's; the trainer measures it (old log-probs)
        metrics.update({_actor_key(k): v for k, v in actor.items()})
        if self.clusters.critic is not None:
            metrics.update({f"critic/{k}": v for k, v in self.train_critic(batch).items()})
        metrics["time/train_s"] = time.perf_counter() - t0

        # 5. send the new weights to the inference engine (after the requests already sent)
        self.ctl.phase("sync")
        if self.engine_sleeps:
            t0 = time.perf_counter()
            self.clusters.actor_infer.call(ActorInferWorker.wake)
            metrics["time/engine_wake_s"] = time.perf_counter() - t0
        metrics["time/weight_sync_s"] = self.sync_weights(version=step)
        metrics.update(self.sync_checked)  # sync/verified, time/sync_check_s

        # 6. the FLOP account: each phase's useful FLOPs over its time x the peak (perf/*)
        if self.perf is not None:
            flops = self.work.flops(self.perf.model, rollout_groups(batch))
            metrics.update(self.perf.step_metrics(flops, metrics))
        return StepResult(metrics, rollout.rows, rollout.summary)

    # ---- pieces of a step ------------------------------------------------------------
    def even_batch(self, batch: Batch) -> tuple[Batch, dict[str, float]]:
        """Data parallel: every rank gets the same number of rows (ZeRO-3's gathers are
        collective), so a short batch (dynamic sampling, group filtering) drops its last
        groups, or repeats its groups when it has fewer rows than one split
        (`data_parallel.even_rows`); the metrics count the rows dropped and repeated."""
        n = self.clusters.actor_train.world_size
        if n == 1:
            return batch, {}
        rows = data_parallel.even_rows(len(batch), self.source.group_size, n)
        dropped, repeated = max(len(batch) - len(rows), 0), max(len(rows) - len(batch), 0)
        metrics = {
            "rollout/dp_dropped_rows": float(dropped),
            "rollout/dp_repeated_rows": float(repeated),
        }
        if dropped:
            self.run.log_event(f"step: {dropped} row(s) dropped to split the batch over {n} ranks")
        if repeated:
            self.run.log_event(
                f"step: {len(batch)} row(s) cannot split over {n} ranks in whole groups: "
                f"the groups repeated to {len(rows)} rows"
            )
        return (batch.select(rows) if dropped or repeated else batch), metrics

    def forward(self, batch: Batch) -> None:
        """`ref_logprobs`, `old_logprobs` and `values` on the batch, as the recipe needs."""
        c = self.clusters
        sizes = self.update_args.forward_sizes()
        if c.reference is not None:
            batch.set(
                REF_LOGPROBS,
                c.reference.dispatch(ReferenceWorker.compute_logprobs, batch, **sizes),
            )
        elif self.cfg.reference_role == ACTOR_TRAIN:  # LoRA: the policy, adapters off
            batch.set(
                REF_LOGPROBS,
                c.actor_train.dispatch(ActorTrainWorker.compute_ref_logprobs, batch, **sizes),
            )
        if self.needs_old_logprobs and self.cfg.algorithm.router_replay == "R2":
            old = c.actor_train.dispatch(ActorTrainWorker.compute_old_policy, batch, **sizes)
            batch.set(OLD_LOGPROBS, old[OLD_LOGPROBS])  # and the routing the update replays
            batch.set(OLD_ROUTED_EXPERTS, old[OLD_ROUTED_EXPERTS])
        elif self.needs_old_logprobs:
            batch.set(
                OLD_LOGPROBS,
                c.actor_train.dispatch(ActorTrainWorker.compute_logprobs, batch, **sizes),
            )
        if c.critic is not None:
            batch.set(
                VALUES,
                c.critic.dispatch(
                    CriticWorker.compute_values, batch, shared_prefix=self.update_args.shared_prefix
                ),
            )

    def train_actor(self, batch: Batch) -> dict[str, float]:
        """The policy update; with N data-parallel ranks each gets its share of every
        mini-batch (`data_parallel.shard_order`) and the metrics are averaged over ranks."""
        train = self.clusters.actor_train
        n = train.world_size
        if n == 1:
            return train.call(ActorTrainWorker.train_step, batch, self.update_args)[0]
        order = data_parallel.shard_order(len(batch), self.update_args.mini_batch_size, n)
        per_rank = train.dispatch(
            ActorTrainWorker.train_step, batch.select(order), args=self.update_args
        )
        return data_parallel.mean_metrics(per_rank)

    def train_critic(self, batch: Batch) -> dict[str, float]:
        cfg = self.cfg
        return self.clusters.critic.call(
            CriticWorker.train_step,
            batch,
            value_clip=cfg.algorithm.value_clip,
            mini_batch_size=cfg.train.mini_batch_size,
            epochs=cfg.algorithm.ppo_epochs,
            shared_prefix=self.update_args.shared_prefix,
        )[0]

    def sync_weights(self, version: int) -> float:
        """Send actor_train's weights (those after step `version`) to actor_infer and verify
        what arrived (`sync_verify.py`: a mismatch stops the run); returns the time, the
        check's included (`self.sync_checked` holds the check's metrics)."""
        self.source.before_sync(version)
        t0 = time.perf_counter()
        stale = self.ctl.faults.take("stale", "sync", self.ctl.current_step)
        self.sync_checked = verified_sync(
            self.clusters, version, self.cfg.run.sync_retry, self.run.log_event, stale
        )
        return time.perf_counter() - t0

    def validate(self) -> dict[str, float]:
        self.ctl.phase("validate")
        return self.source.validate()

    # ---- checkpoints -------------------------------------------------------------------
    def _stateful(self) -> list:
        """The clusters whose state (optimizer, scheduler, ...) a checkpoint holds."""
        return [c for c in (self.clusters.actor_train, self.clusters.critic) if c is not None]

    def checkpoint(self, step: int) -> None:
        state = {
            **self.source.state_dict(),
            "kl_controller": self.kl_ctl.state_dict(),
            "running_norm": self.running.state_dict() if self.running else None,
        }
        files = self.source.files()
        self.ctl.checkpoints.save(step, state, stateful=self._stateful(), driver_files=files)

    def restore(self, checkpoint: Path | None) -> int:
        """Load `checkpoint` (None: the start) into the freshly started workers and the
        driver, rewind the run folder to it; returns its step."""
        state = self.ctl.checkpoints.restore(checkpoint, stateful=self._stateful())
        self._fresh_driver_state()
        self.source.load_state_dict(state, checkpoint)
        if state is None:
            return 0
        if "kl_controller" in state:  # older agentic checkpoints kept no driver state
            self.kl_ctl.load_state_dict(state["kl_controller"])
        if self.running is not None and state.get("running_norm") is not None:
            self.running.load_state_dict(state["running_norm"])
        self.sync_weights(version=int(state["step"]))
        return int(state["step"])


def _actor_key(key: str) -> str:
    """Where an actor_train metric goes: the sampler-vs-trainer gap is the rollout's
    (`rollout/mismatch_*`), an MoE model's routing its own (`moe/*`), the rest `actor/*`."""
    if key.startswith("mismatch_"):
        return f"rollout/{key}"
    return key if key.startswith("moe/") else f"actor/{key}"

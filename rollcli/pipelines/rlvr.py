"""The RLVR pipeline: one readable loop over steps.

generate → reward → reference / old log-probs / values → advantages → train actor
(and critic) → sync weights → validate → log → checkpoint

`restore` loads a checkpoint into fresh workers and the driver (resume, and recovery when a
worker dies); everything a later step depends on is in the checkpoint, so a resumed run
repeats the uninterrupted one exactly.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import torch

from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.recipe import RecipeConfig
from rollcli.data.prompts import Prompt
from rollcli.data.sampler import PromptSampler
from rollcli.distributed.cluster import worker_lost_errors
from rollcli.distributed.weight_sync import free_port
from rollcli.pipelines.advantage_stage import add_advantages, make_kl_controller
from rollcli.pipelines.display_protocol import Display
from rollcli.pipelines.rlvr_data import load_prompt_sets, tokenize_prompts
from rollcli.pipelines.rollout import RolloutResult, run_dynamic_rollout, run_rollout
from rollcli.pipelines.workers_setup import create_clusters
from rollcli.runs.checkpoint import latest_checkpoint, read_state, write_checkpoint
from rollcli.runs.faults import FaultInjector
from rollcli.runs.rng import capture_rng, restore_rng
from rollcli.runs.run_dir import RunDir
from rollcli.strategies.hf_infer import SamplingParams
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.infer_engines import resolve_engine
from rollcli.workers.policy_loss_args import PolicyUpdateArgs

PHASES = {
    "generate": "generating",
    "reward": "scoring rewards",
    "forward": "scoring with reference / critic",
    "train": "training",
    "sync": "syncing weights",
    "validate": "validating",
}
# A checkpoint's `rng.pt` holds the driver's generators and every worker's, per role and rank.
RNG_FILE = "rng.pt"


class WorkersLostError(RuntimeError):
    pass


class RLVRPipeline:
    def __init__(
        self, cfg: RecipeConfig, run: RunDir, run_id: str, model_path: str, display: Display
    ) -> None:
        self.cfg = cfg
        self.run = run
        self.run_id = run_id
        self.model_path = model_path
        self.ui = display
        self.tracker = None
        self.clusters = None
        self.current_step = 0
        self.restarts = 0
        self.stop_requested = False  # set by the first Ctrl-C: finish the step, checkpoint, stop
        self.stopped_early = False
        self.faults = FaultInjector.from_env(self._kill_worker)
        self.engine = resolve_engine(cfg.rollout.engine)

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
        self._start_workers()
        alg, train = cfg.algorithm, cfg.train
        self.update_args = PolicyUpdateArgs(
            policy_loss=alg.policy_loss,
            clip_low=alg.clip_low,
            clip_high=alg.clip_high,
            dual_clip=alg.dual_clip,
            loss_agg=alg.loss_agg,
            entropy_coef=alg.entropy_coef,
            kl_loss_coef=alg.kl_coef if alg.kl_in == "loss" else 0.0,
            kl_estimator=alg.kl_estimator,
            epochs=alg.ppo_epochs,
            mini_batch_size=train.mini_batch_size,
            micro_batch_size=train.micro_batch_size,
            norm_len=alg.loss_norm_len,
            temperature=cfg.rollout.temperature or 1.0,
        )
        on_policy = alg.ppo_epochs == 1 and train.mini_batch_size in (None, cfg.rollout.batch_size)
        self.needs_old_logprobs = not on_policy or (cfg.needs_reference and alg.kl_in == "reward")
        self.run.log_event(
            f"workers ready: engine={self.engine}, {self.cpu.heavy_threads} threads per colocated role, "
            f"{len(self.train_prompts)} train / {len(self.val_prompts)} validation prompts"
        )

    def _fresh_driver_state(self) -> None:
        cfg = self.cfg
        self.sampler = PromptSampler(len(self.train_prompts), cfg.seed)
        self.kl_ctl = make_kl_controller(cfg.algorithm)
        self.running = RunningMeanStd() if cfg.algorithm.norm_mode == "running" else None

    def _start_workers(self) -> None:
        cfg, train = self.cfg, self.cfg.train
        self.ui.phase("starting workers")
        self.clusters, self.cpu = create_clusters(
            model_path=self.model_path,
            seed=cfg.seed,
            cores=cfg.resources.num_cpus or 0,
            infer_workers=cfg.rollout.num_workers,
            reward_workers=cfg.reward.num_workers,
            infer_engine=self.engine,
            infer_engine_kwargs=dict(
                dtype=cfg.rollout.vllm_dtype, kv_cache_gib=cfg.rollout.vllm_kv_cache_gib
            )
            if self.engine == "vllm"
            else None,
            train_kwargs=dict(
                lr=train.lr,
                betas=train.betas,
                weight_decay=train.weight_decay,
                warmup_steps=train.warmup_steps,
                grad_clip=train.grad_clip,
                gradient_checkpointing=train.gradient_checkpointing,
            ),
            reward_kwargs=dict(
                fn=cfg.reward.fn,
                options={"format_weight": cfg.reward.format_weight},
                timeout_s=cfg.reward.timeout_s,
            ),
            reference=cfg.needs_reference,
            critic_kwargs=dict(lr=cfg.critic.lr, grad_clip=cfg.critic.grad_clip)
            if cfg.needs_critic
            else None,
        )
        self._init_weight_sync()
        self.worker_pids = {c.name: c.call("process_id") for c in self.clusters.all()}

    def _init_weight_sync(self) -> None:
        import ray

        infer = self.clusters.actor_infer
        world, port = 1 + infer.world_size, free_port()
        refs = self.clusters.actor_train.call_async("init_weight_sync", "127.0.0.1", port, world)
        refs += [
            w.init_weight_sync.remote("127.0.0.1", port, rank + 1, world)
            for rank, w in enumerate(infer.workers)
        ]
        ray.get(refs)

    # ---- the loop --------------------------------------------------------------------
    def train(self, start_step: int = 0) -> dict[str, Any]:
        """Steps `start_step + 1 ..`; a worker that dies sends the run back to its newest
        checkpoint with fresh workers (at most `run.max_restarts` times)."""
        cfg = self.cfg
        self.ui.start(
            run_id=self.run_id,
            run_dir=str(self.run.root),
            total_steps=cfg.train.steps,
            start_step=start_step,
            engine=self.engine,
        )
        limit_s = cfg.run.time_limit_min * 60
        deadline = time.perf_counter() + limit_s if limit_s else float("inf")
        step = start_step
        while True:
            try:
                return self._steps(step, deadline)
            except worker_lost_errors() as exc:
                step = self.recover(exc)

    def _steps(self, step: int, deadline: float) -> dict[str, Any]:
        cfg = self.cfg
        last: dict[str, Any] = {}
        if step == 0:  # the baseline every later validation is compared with
            self.current_step = 0
            last = {"step": 0, **self.validate()}
            self.log(last)
        if self._stop_here(step, saved=True):  # Ctrl-C during the baseline: nothing new to save
            return last
        while step < cfg.train.steps:
            step += 1
            t_step = time.perf_counter()
            metrics, rows = self.step(step)

            # validate, log, checkpoint (the last step, or the last one the time limit allows)
            final = self._final(step, deadline)
            if final or self._due(step, cfg.run.eval_every):
                metrics.update(self.validate())
            metrics["time/step_s"] = time.perf_counter() - t_step
            if cfg.run.save_samples:
                self.run.write_samples(step, rows)
            self.log(metrics)
            saved = final or self._due(step, cfg.run.save_every)
            if saved:
                self.checkpoint(step)
            last = metrics
            if final or self._stop_here(step, saved):
                break
        return last

    def step(self, step: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """generate → reward → reference / old log-probs / values → advantages → update →
        sync; returns the step's metrics and its sample rows."""
        cfg = self.cfg
        self.current_step = step
        metrics: dict[str, Any] = {"step": step}

        # 1. generate n samples per prompt and score them
        rollout = self.rollout(step)
        batch = rollout.batch
        metrics.update(rollout.metrics)

        # 2. reference log-probs, old log-probs, values
        self._phase("forward")
        t0 = time.perf_counter()
        mb, temp = cfg.train.micro_batch_size, self.update_args.temperature
        if self.clusters.reference is not None:
            batch.set(
                "ref_logprobs",
                self.clusters.reference.dispatch(
                    "compute_logprobs", batch, micro_batch_size=mb, temperature=temp
                ),
            )
        if self.needs_old_logprobs:
            batch.set(
                "old_logprobs",
                self.clusters.actor_train.dispatch(
                    "compute_logprobs", batch, micro_batch_size=mb, temperature=temp
                ),
            )
        if self.clusters.critic is not None:
            batch.set(
                "values",
                self.clusters.critic.dispatch("compute_values", batch, micro_batch_size=mb),
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
        self._phase("train")
        t0 = time.perf_counter()
        actor = self.clusters.actor_train.call("train_step", batch, self.update_args)[0]
        metrics.update({f"actor/{k}": v for k, v in actor.items()})
        if self.clusters.critic is not None:
            critic = self.clusters.critic.call(
                "train_step",
                batch,
                value_clip=cfg.algorithm.value_clip,
                micro_batch_size=mb,
                mini_batch_size=cfg.train.mini_batch_size,
                epochs=cfg.algorithm.ppo_epochs,
            )[0]
            metrics.update({f"critic/{k}": v for k, v in critic.items()})
        metrics["time/train_s"] = time.perf_counter() - t0

        # 5. send the new weights to the inference engine
        self._phase("sync")
        metrics["time/weight_sync_s"] = self.sync_weights()
        return metrics, rollout.rows

    def _final(self, step: int, deadline: float) -> bool:
        if step == self.cfg.train.steps:
            return True
        if time.perf_counter() >= deadline:
            self.run.log_event(
                f"time limit of {self.cfg.run.time_limit_min:g} min reached after step {step}"
            )
            return True
        return False

    def _stop_here(self, step: int, saved: bool) -> bool:
        """After a Ctrl-C: stop at this step boundary, with a checkpoint of `step`. The
        step is not validated, so the metrics stay those of the uninterrupted run."""
        if not self.stop_requested:
            return False
        if not saved:
            self.checkpoint(step)
        self.stopped_early = True
        self.run.log_event(f"stopped after step {step}, as requested")
        return True

    # ---- pieces of a step ------------------------------------------------------------
    def draw(self, num_prompts: int) -> tuple[list[Prompt], list[list[int]]]:
        """The next prompts from the seeded sampler (and their token ids)."""
        indices = self.sampler.next_indices(num_prompts)
        return [self.train_prompts[i] for i in indices], [self.train_ids[i] for i in indices]

    def rollout(self, step: int) -> RolloutResult:
        """Generate and score a step's samples (with dynamic sampling when enabled)."""
        cfg, c = self.cfg, self.clusters
        if cfg.algorithm.dynamic_sampling:
            return run_dynamic_rollout(
                c.actor_infer,
                c.reward,
                self.draw,
                self.pad_id,
                self.sampling(step),
                cfg.rollout.prompts_per_step,
                cfg.algorithm.max_resample_rounds,
                self.ui.generation,
                self._phase,
            )
        prompts, prompt_ids = self.draw(cfg.rollout.prompts_per_step)
        return run_rollout(
            c.actor_infer,
            c.reward,
            prompts,
            prompt_ids,
            self.pad_id,
            self.sampling(step),
            self.ui.generation,
            self._phase,
        )

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

    def sync_weights(self) -> float:
        import ray

        t0 = time.perf_counter()
        refs = self.clusters.actor_train.call_async("broadcast_weights")
        refs += self.clusters.actor_infer.call_async("receive_weights")
        ray.get(refs)
        return time.perf_counter() - t0

    def validate(self) -> dict[str, float]:
        from rollcli.pipelines.rollout import generate, score

        self._phase("validate")
        r = self.cfg.rollout
        params = SamplingParams(
            n=1, max_new_tokens=r.val_max_new_tokens or r.max_new_tokens, temperature=0.0
        )
        t0 = time.perf_counter()
        gens = generate(self.clusters.actor_infer, self.val_ids, params, self.ui.generation)
        samples = [
            {
                "response": g["text"],
                "answer": self.val_prompts[g["prompt_index"]].answer,
                "tag": self.val_prompts[g["prompt_index"]].tag,
            }
            for g in gens
        ]
        results = score(self.clusters.reward, samples)
        correct = [float(res.get("correct", res["score"] >= 1.0)) for res in results]
        accuracy = sum(correct) / len(correct)
        self.run.log_event(
            f"validation: accuracy {accuracy:.3f} on {len(correct)} held-out prompts (greedy)"
        )
        return {
            "val/accuracy": accuracy,
            "val/reward_mean": sum(res["score"] for res in results) / len(results),
            "val/response_length": sum(len(g["token_ids"]) for g in gens) / len(gens),
            "time/validate_s": time.perf_counter() - t0,
        }

    def checkpoint(self, step: int) -> None:
        import ray

        self.ui.phase("saving checkpoint")
        actor = self.clusters.actor_train.workers[0]
        critic = self.clusters.critic.workers[0] if self.clusters.critic is not None else None

        def fill(folder: Path) -> None:
            refs = [actor.save_pretrained.remote(str(folder)), actor.save_state.remote(str(folder))]
            if critic is not None:
                refs.append(critic.save_state.remote(str(folder)))
            ray.get(refs)
            rng = {"driver": capture_rng()}
            rng.update({c.name: c.call("rng_state") for c in self.clusters.all()})
            torch.save(rng, folder / RNG_FILE)

        state = {
            "step": step,
            "sampler": self.sampler.state_dict(),
            "kl_controller": self.kl_ctl.state_dict(),
            "running_norm": self.running.state_dict() if self.running else None,
            "metrics_lines": len(self.run.read_metrics()),
        }
        path = write_checkpoint(
            self.run.checkpoints,
            step,
            fill,
            state,
            self.cfg.run.keep_last,
            before_rename=lambda: self.faults.hit("checkpoint", step),
        )
        self.run.log_event(f"checkpoint written: {path}")

    def restore(self, checkpoint: Path | None) -> int:
        """Load `checkpoint` (None: the start) into the workers and the driver and rewind the
        run folder to it; returns its step. The workers must be freshly started."""
        import ray

        if checkpoint is None:
            self._fresh_driver_state()
            self.run.rewind(0, 0)
            return 0
        self.ui.phase(f"loading checkpoint {checkpoint.name}")
        state = read_state(checkpoint)
        refs = self.clusters.actor_train.call_async("load_state", str(checkpoint))
        if self.clusters.critic is not None:
            refs += self.clusters.critic.call_async("load_state", str(checkpoint))
        ray.get(refs)
        self.sampler.load_state_dict(state["sampler"])
        self.kl_ctl.load_state_dict(state["kl_controller"])
        if self.running is not None and state["running_norm"] is not None:
            self.running.load_state_dict(state["running_norm"])
        rng = torch.load(checkpoint / RNG_FILE, weights_only=False)
        restore_rng(rng["driver"])
        refs = []
        for cluster in self.clusters.all():
            for worker, worker_rng in zip(cluster.workers, rng[cluster.name], strict=True):
                refs.append(worker.load_rng_state.remote(worker_rng))
        ray.get(refs)
        self.sync_weights()
        self.run.rewind(state["step"], state["metrics_lines"])
        if self.tracker is not None:
            self.tracker.rewind(state["step"])
        return int(state["step"])

    def recover(self, exc: BaseException) -> int:
        """A worker died: restart every worker from the newest checkpoint; returns its step."""
        step = self.current_step
        self.restarts += 1
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if self.restarts > self.cfg.run.max_restarts:
            raise WorkersLostError(
                f"a worker died during step {step} and run.max_restarts="
                f"{self.cfg.run.max_restarts} restarts are used up ({reason})"
            ) from exc
        self.run.log_event(
            f"a worker died during step {step} ({type(exc).__name__}: {reason}); restarting "
            f"the workers (restart {self.restarts} of {self.cfg.run.max_restarts})"
        )
        self.clusters.kill()
        self._start_workers()
        checkpoint = latest_checkpoint(self.run.checkpoints)
        start = self.restore(checkpoint)
        where = f"checkpoint {checkpoint.name}" if checkpoint else "the start"
        self.run.log_event(f"workers restarted; retrying from step {start + 1} ({where})")
        return start

    def request_stop(self) -> None:
        self.stop_requested = True
        self.run.log_event(
            f"stop requested (step {self.current_step}): stopping at the end of the step"
        )

    def _phase(self, point: str) -> None:
        self.ui.phase(PHASES[point])
        self.faults.hit(point, self.current_step)

    def _kill_worker(self, point: str) -> None:
        """Fault injection: SIGKILL the process of the worker that `point` runs on."""
        role = {"generate": "actor_infer", "validate": "actor_infer", "reward": "reward"}.get(
            point, "actor_train"
        )
        if point == "forward" and "reference" in self.worker_pids:
            role = "reference"
        os.kill(self.worker_pids[role][0], signal.SIGKILL)

    def log(self, metrics: dict[str, Any]) -> None:
        self.run.log_metrics(metrics)
        if self.tracker is not None:
            self.tracker.log(metrics, metrics["step"])
        self.run.write_status("running", step=metrics["step"], total_steps=self.cfg.train.steps)
        self.ui.step_done(metrics["step"], metrics)

    @staticmethod
    def _due(step: int, every: int) -> bool:
        return every > 0 and step % every == 0

    def shutdown(self) -> None:
        if self.clusters is not None:
            self.clusters.kill()
        if self.tracker is not None:
            self.tracker.close()

"""The RLVR pipeline: one readable loop over steps.

generate → reward → reference / old log-probs / values → advantages → train actor
(and critic) → sync weights → validate → log → checkpoint
"""

from __future__ import annotations

import time
from typing import Any

import torch

from rollcli.algorithms.normalization import RunningMeanStd
from rollcli.config.recipe import RecipeConfig
from rollcli.data.prompts import Prompt
from rollcli.data.sampler import PromptSampler
from rollcli.distributed.weight_sync import free_port
from rollcli.pipelines.advantage_stage import add_advantages, make_kl_controller
from rollcli.pipelines.display_protocol import Display
from rollcli.pipelines.rlvr_data import load_prompt_sets, tokenize_prompts
from rollcli.pipelines.rollout import RolloutResult, run_dynamic_rollout, run_rollout
from rollcli.pipelines.workers_setup import create_clusters
from rollcli.runs.checkpoint import write_checkpoint
from rollcli.runs.run_dir import RunDir
from rollcli.strategies.hf_infer import SamplingParams
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.workers.policy_loss_args import PolicyUpdateArgs


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

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        self.ui.phase("loading data")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        self.train_prompts, self.val_prompts = load_prompt_sets(cfg.data, cfg.seed)
        self.train_ids = tokenize_prompts(tokenizer, self.train_prompts, cfg.data.max_prompt_tokens)
        self.val_ids = tokenize_prompts(tokenizer, self.val_prompts, cfg.data.max_prompt_tokens)
        self.sampler = PromptSampler(len(self.train_prompts), cfg.seed)
        self.kl_ctl = make_kl_controller(cfg.algorithm)
        self.running = RunningMeanStd() if cfg.algorithm.norm_mode == "running" else None

        self.ui.phase("starting workers")
        alg, train = cfg.algorithm, cfg.train
        self.clusters, self.cpu = create_clusters(
            model_path=self.model_path,
            seed=cfg.seed,
            cores=cfg.resources.num_cpus or 0,
            infer_workers=cfg.rollout.num_workers,
            reward_workers=cfg.reward.num_workers,
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
            f"workers ready: engine=hf, {self.cpu.heavy_threads} threads per colocated role, "
            f"{len(self.train_prompts)} train / {len(self.val_prompts)} validation prompts"
        )

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
        cfg = self.cfg
        steps = cfg.train.steps
        last: dict[str, Any] = {}
        self.ui.start(
            run_id=self.run_id,
            run_dir=str(self.run.root),
            total_steps=steps,
            start_step=start_step,
            engine="hf",
        )
        if start_step == 0:  # the baseline every later validation is compared with
            last = {"step": 0, **self.validate()}
            self.log(last)
        limit_s = cfg.run.time_limit_min * 60
        deadline = time.perf_counter() + limit_s if limit_s else float("inf")
        for step in range(start_step + 1, steps + 1):
            t_step = time.perf_counter()
            metrics: dict[str, Any] = {"step": step}

            # 1. generate n samples per prompt and score them
            self.ui.phase("generating")
            rollout = self.rollout(step)
            batch = rollout.batch
            metrics.update(rollout.metrics)

            # 2. reference log-probs, old log-probs, values
            self.ui.phase("scoring with reference / critic")
            t0 = time.perf_counter()
            mb = cfg.train.micro_batch_size
            if self.clusters.reference is not None:
                batch.set(
                    "ref_logprobs",
                    self.clusters.reference.dispatch(
                        "compute_logprobs",
                        batch,
                        micro_batch_size=mb,
                        temperature=self.update_args.temperature,
                    ),
                )
            temp = self.update_args.temperature
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
            self.ui.phase("training")
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
            self.ui.phase("syncing weights")
            metrics["time/weight_sync_s"] = self.sync_weights()

            # 6. validate, log, checkpoint (the last step, or the last one the time limit allows)
            final = step == steps or time.perf_counter() >= deadline
            if final and step < steps:
                self.run.log_event(
                    f"time limit of {cfg.run.time_limit_min:g} min reached after step {step}"
                )
            if final or self._due(step, cfg.run.eval_every):
                metrics.update(self.validate())
            metrics["time/step_s"] = time.perf_counter() - t_step
            if cfg.run.save_samples:
                self.run.write_samples(step, rollout.rows)
            self.log(metrics)
            if final or self._due(step, cfg.run.save_every):
                self.checkpoint(step)
            last = metrics
            if final:
                break
        return last

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

        self.ui.phase("validating")
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

        def fill(folder) -> None:  # noqa: ANN001
            refs = [self.clusters.actor_train.workers[0].save_pretrained.remote(str(folder))]
            refs.append(self.clusters.actor_train.workers[0].save_state.remote(str(folder)))
            if self.clusters.critic is not None:
                refs.append(self.clusters.critic.workers[0].save_state.remote(str(folder)))
            ray.get(refs)

        state = {
            "step": step,
            "sampler": self.sampler.state_dict(),
            "kl_controller": self.kl_ctl.state_dict(),
            "running_norm": self.running.state_dict() if self.running else None,
            "metrics_lines": len(self.run.read_metrics()),
            "torch_rng": torch.random.initial_seed(),
        }
        path = write_checkpoint(self.run.checkpoints, step, fill, state, self.cfg.run.keep_last)
        self.run.log_event(f"checkpoint written: {path}")

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
        if getattr(self, "clusters", None) is not None:
            self.clusters.kill()
        if self.tracker is not None:
            self.tracker.close()

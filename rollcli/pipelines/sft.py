"""The SFT pipeline: supervised fine-tuning on conversations, loss on assistant tokens.

draw samples → pack into rows → train (one optimizer step) → validate (held-out loss, and
greedy answers scored by the reward when the data has answers) → log → checkpoint

The cold start before RL: `roll data sft-from-run` turns an RL run's verified samples
into a data file for it (rejection sampling).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from rollcli.config.recipe import RecipeConfig
from rollcli.data.packing import sequence_batch
from rollcli.data.sampler import PromptSampler
from rollcli.distributed.cluster import Cluster
from rollcli.pipelines.answer_check import answer_accuracy
from rollcli.pipelines.display_protocol import Display
from rollcli.pipelines.offline_data import generation_prompts, load_chat_sets, tokenize_chats
from rollcli.pipelines.run_control import ControlledPipeline, RunControl
from rollcli.pipelines.workers_setup import Placement, build_clusters
from rollcli.planning.role_table import roles_for
from rollcli.runs.run_dir import RunDir
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.tracking.flops import train_factor
from rollcli.tracking.step_perf import RunPerf


class SFTPipeline(ControlledPipeline):
    def __init__(
        self, cfg: RecipeConfig, run: RunDir, run_id: str, model_path: str, display: Display
    ) -> None:
        self.cfg = cfg
        self.run = run
        self.run_id = run_id
        self.model_path = model_path
        self.ctl = RunControl(cfg, run, display)
        self.clusters: list[Cluster] | None = None

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, sft = self.cfg, self.cfg.sft
        self.ctl.ui.phase("loading data")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        train, val = load_chat_sets(cfg.data, cfg.seed)
        self.train_samples, cut = tokenize_chats(tokenizer, train, sft.max_tokens)
        val_samples, cut_val = tokenize_chats(tokenizer, val, sft.max_tokens)
        self.val_batch = sequence_batch(val_samples, self.pad_id, sft.max_tokens, sft.packing)
        self.val_examples, self.val_prompt_ids = (
            generation_prompts(tokenizer, val) if sft.val_generate else ([], [])
        )
        self.sampler = PromptSampler(len(self.train_samples), cfg.seed)
        self._start_workers()
        self.perf = RunPerf.start(self.run, self.model_path, cfg.run.peak_flops, self.actor)
        self.run.log_event(
            f"workers ready: {len(train)} train / {len(val)} validation conversations"
            + (
                f", {cut + cut_val} cut to sft.max_tokens = {sft.max_tokens}"
                if cut + cut_val
                else ""
            )
        )

    def _start_workers(self) -> None:
        self.ctl.ui.phase("starting workers")
        clusters = build_clusters(
            self.cfg, roles_for(self.cfg), Placement.build(self.cfg), model_path=self.model_path
        )
        self.actor, self.clusters = clusters["actor_train"], clusters.all()
        self.ctl.started(self.clusters)

    # ---- the loop --------------------------------------------------------------------
    def _steps(self, step: int, deadline: float) -> dict[str, Any]:
        cfg, ctl = self.cfg, self.ctl
        last: dict[str, Any] = {}
        if step == 0:  # the baseline every later validation is compared with
            ctl.current_step = 0
            last = {"step": 0, **self.validate()}
            ctl.log(last)
        if ctl.stop_here(step, saved=True, checkpoint=self.checkpoint):
            return last
        while step < cfg.train.steps:
            step += 1
            t_step = time.perf_counter()
            metrics = self.step(step)
            final = ctl.final(step, deadline)
            if final or ctl.due(step, cfg.run.eval_every):
                metrics.update(self.validate())
            metrics["time/step_s"] = time.perf_counter() - t_step
            ctl.log(metrics)
            saved = final or ctl.due(step, cfg.run.save_every)
            if saved:
                self.checkpoint(step)
            last = metrics
            if final or ctl.stop_here(step, saved, self.checkpoint):
                break
        return last

    def step(self, step: int) -> dict[str, Any]:
        """Draw `sft.batch_size` samples, pack them, take one optimizer step."""
        cfg = self.cfg
        self.ctl.current_step = step
        samples = [self.train_samples[i] for i in self.sampler.next_indices(cfg.sft.batch_size)]
        batch = sequence_batch(samples, self.pad_id, cfg.sft.max_tokens, cfg.sft.packing)
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.actor.call("sft_step", batch, micro_batch_size=cfg.train.micro_batch_size)[0]
        real = int(batch["length"].sum())
        metrics = {
            "step": step,
            **{f"actor/{k}": v for k, v in out.items()},
            "data/rows": float(len(batch)),
            "data/loss_tokens": float(batch.meta["targets"]),
            "data/padding_frac": 1 - real / batch["input_ids"].numel(),
            "time/train_s": time.perf_counter() - t0,
        }
        # the FLOP account (perf/*): forward + backward over the samples' tokens
        forward = self.perf.model.sequences(
            [len(ids) for ids, _ in samples], head_tokens=batch.meta["targets"]
        )
        lora = cfg.train.lora is not None
        flops = {"train": train_factor(frozen_weights=lora) * forward}
        return {**metrics, **self.perf.step_metrics(flops, metrics)}

    def validate(self) -> dict[str, float]:
        cfg = self.cfg
        self.ctl.phase("validate")
        t0 = time.perf_counter()
        out = self.actor.call(
            "eval_loss", self.val_batch, micro_batch_size=cfg.train.micro_batch_size
        )[0]
        metrics = {"val/loss": out["loss"], "val/perplexity": math.exp(min(out["loss"], 50.0))}
        if self.val_examples:
            r = cfg.rollout
            acc = answer_accuracy(
                self.actor,
                self.val_examples,
                self.val_prompt_ids,
                max_new_tokens=r.val_max_new_tokens or r.max_new_tokens,
                reward_fn=cfg.reward.fn,
                reward_options=cfg.reward.worker_options,
                timeout_s=cfg.reward.timeout_s,
            )
            metrics.update({f"val/{k}": v for k, v in acc.items()})
        self.run.log_event(
            f"validation: loss {out['loss']:.4f} on {int(out['tokens'])} held-out assistant tokens"
            + (f", accuracy {metrics['val/accuracy']:.3f} (greedy)" if self.val_examples else "")
        )
        metrics["time/validate_s"] = time.perf_counter() - t0
        return metrics

    # ---- checkpoints -----------------------------------------------------------------
    def checkpoint(self, step: int) -> None:
        self.ctl.checkpoint(step, {"sampler": self.sampler.state_dict()})

    def restore(self, checkpoint: Path | None) -> int:
        self.sampler = PromptSampler(len(self.train_samples), self.cfg.seed)
        state = self.ctl.restore(checkpoint)
        if state is None:
            return 0
        self.sampler.load_state_dict(state["sampler"])
        return int(state["step"])

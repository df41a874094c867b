"""The SFT pipeline: supervised fine-tuning on conversations, loss on assistant tokens.

draw samples → pack into rows → train (one optimizer step); the driver loop
(`driver.drive`) validates (held-out loss, and greedy answers scored by the reward when the
data has answers), logs and checkpoints.

The cold start before RL: `roll data sft-from-run` turns an RL run's verified samples
into a data file for it (rejection sampling).
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from rollcli.config.recipe import SFTRecipe
from rollcli.data.offline_sets import generation_prompts
from rollcli.data.packing import sequence_batch
from rollcli.data.prepared import chat_data
from rollcli.data.sampler import PromptSampler
from rollcli.evaluation.answer_check import recipe_accuracy
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.sampler_checkpoint import restore_sampler, save_sampler
from rollcli.runtime.run_control import RunControl, report_data_notes
from rollcli.runtime.workers_setup import start_clusters
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.tracking.flops import train_factor
from rollcli.tracking.step_perf import RunPerf
from rollcli.workers.sft_train import SFTTrainWorker


class SFTPipeline:
    engine = "hf"  # no inference engine: greedy validation answers come from actor_train

    def __init__(self, cfg: SFTRecipe, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.model_path = model_path

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, sft = self.cfg, self.cfg.sft
        self.ctl.ui.phase("loading data")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        data = chat_data(cfg.data, cfg.seed, tokenizer, sft.max_tokens, "sft.max_tokens")
        report_data_notes(self.ctl, data.notes)
        train, val, self.train_samples = data.train, data.val, data.train_samples
        self.val_batch = sequence_batch(data.val_samples, self.pad_id, sft.max_tokens, sft.packing)
        self.val_examples, self.val_prompt_ids = (
            generation_prompts(tokenizer, val) if sft.val_generate else ([], [])
        )
        self.sampler = PromptSampler(len(self.train_samples), cfg.seed)
        self.start_workers()
        self.perf = RunPerf.start(
            self.run,
            self.model_path,
            cfg.run.peak_flops,
            lambda: self.actor.call_rank(0, SFTTrainWorker.matmul_peak),
        )
        self.run.log_event(
            f"workers ready: {len(train)} train / {len(val)} validation conversations"
        )

    def start_workers(self) -> None:
        self.actor = start_clusters(self.cfg, self.ctl, model_path=self.model_path)["actor_train"]

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        return self.validate()

    def step(self, step: int) -> StepResult:
        """1. draw `sft.batch_size` samples and pack them → 2. one optimizer step → 3. the
        FLOP account."""
        cfg = self.cfg
        # 1. the step's samples, packed into rows
        samples = [self.train_samples[i] for i in self.sampler.next_indices(cfg.sft.batch_size)]
        batch = sequence_batch(samples, self.pad_id, cfg.sft.max_tokens, cfg.sft.packing)

        # 2. one optimizer step on the assistant tokens
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.actor.call(SFTTrainWorker.sft_step, batch, **cfg.train.micro_batching)[0]
        real = int(batch["length"].sum())
        metrics = {
            "step": step,
            **{f"actor/{k}": v for k, v in out.items()},
            "data/rows": float(len(batch)),
            "data/loss_tokens": float(batch.meta["targets"]),
            "data/padding_frac": 1 - real / batch["input_ids"].numel(),
            "time/train_s": time.perf_counter() - t0,
        }
        # 3. the FLOP account (perf/*): forward + backward over the samples' tokens
        forward = self.perf.model.sequences(
            [len(ids) for ids, _ in samples], head_tokens=batch.meta["targets"]
        )
        lora = cfg.train.lora is not None
        flops: dict[str, float] = {"train": train_factor(frozen_weights=lora) * forward}
        return StepResult({**metrics, **self.perf.step_metrics(flops, metrics)})

    def validate(self) -> dict[str, float]:
        cfg = self.cfg
        self.ctl.phase("validate")
        t0 = time.perf_counter()
        out = self.actor.call(SFTTrainWorker.eval_loss, self.val_batch, **cfg.train.micro_batching)[
            0
        ]
        metrics = {"val/loss": out["loss"], "val/perplexity": math.exp(min(out["loss"], 50.0))}
        if self.val_examples:
            acc = recipe_accuracy(self.actor, cfg, self.val_examples, self.val_prompt_ids)
            metrics.update({f"val/{k}": v for k, v in acc.items()})
        self.run.log_event(
            f"validation: loss {out['loss']:.4f} on {int(out['tokens'])} held-out assistant tokens"
            + (f", accuracy {metrics['val/accuracy']:.3f} (greedy)" if self.val_examples else "")
        )
        metrics["time/validate_s"] = time.perf_counter() - t0
        return metrics

    # ---- checkpoints -----------------------------------------------------------------
    def checkpoint(self, step: int) -> None:
        save_sampler(self.ctl, step, self.sampler)

    def restore(self, checkpoint: Path | None) -> int:
        self.sampler, step = restore_sampler(
            self.ctl, checkpoint, len(self.train_samples), self.cfg.seed
        )
        return step

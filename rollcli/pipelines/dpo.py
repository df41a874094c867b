"""The DPO pipeline: direct preference optimisation against a frozen reference.

draw pairs → reference log-probs (reference worker) → train (one optimizer step on the
preference loss); the driver loop (`driver.drive`) validates (held-out pairs), logs and
checkpoints.

With `train.lora` no reference worker runs: the reference is actor_train's model with its
adapters off (`compute_ref_logprobs`).

Held-out metrics: `val/accuracy` is the fraction of pairs whose chosen response the policy
finds more likely than the rejected one (summed log-probs; meaningful from step 0), and
`val/rewards/accuracy` the fraction whose implicit DPO reward ranks chosen above rejected
(0 at step 0, where policy and reference agree).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rollcli.algorithms.dpo_loss import dpo_loss
from rollcli.config.recipe import DPORecipe
from rollcli.data.batch_keys import REF_LOGPROBS, RESPONSE_MASK
from rollcli.data.pairs import pair_batch
from rollcli.data.prepared import pair_data
from rollcli.data.sampler import PromptSampler
from rollcli.distributed.calls import Method
from rollcli.distributed.cluster import Cluster
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.sampler_checkpoint import restore_sampler, save_sampler
from rollcli.runtime.run_control import RunControl, report_data_notes
from rollcli.runtime.workers_setup import start_clusters
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.workers.dpo_train import DPOArgs, DPOTrainWorker, pair_scores
from rollcli.workers.reference import ReferenceWorker


class DPOPipeline:
    engine = "hf"  # no inference engine

    def __init__(self, cfg: DPORecipe, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.model_path = model_path
        self.val_ref: torch.Tensor | None = None  # the reference never changes: score it once

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, dpo = self.cfg, self.cfg.dpo
        self.ctl.ui.phase("loading data")
        tokenizer = load_tokenizer(self.model_path)
        self.pad_id = tokenizer.pad_token_id
        data = pair_data(cfg.data, cfg.seed, tokenizer, dpo.max_response_tokens)
        report_data_notes(self.ctl, data.notes)
        self.train_pairs, val_pairs = data.train, data.val
        self.val_batch = pair_batch(val_pairs, self.pad_id)
        self.sampler = PromptSampler(len(self.train_pairs), cfg.seed)
        self.args = DPOArgs(
            loss_type=dpo.loss,
            beta=dpo.beta,
            label_smoothing=dpo.label_smoothing,
            micro_batch_size=cfg.train.micro_batch_size,
            micro_batch_tokens=cfg.train.micro_batch_tokens,
        )
        self.start_workers()
        self.run.log_event(
            f"workers ready: {len(self.train_pairs)} train / {len(val_pairs)} validation pairs"
        )

    def start_workers(self) -> None:
        clusters = start_clusters(self.cfg, self.ctl, model_path=self.model_path)
        self.actor = clusters["actor_train"]
        self.reference, self.ref_method = (
            self.actor,
            DPOTrainWorker.compute_ref_logprobs,
        )  # LoRA: adapters off
        if clusters.reference is not None:
            self.reference, self.ref_method = clusters.reference, ReferenceWorker.compute_logprobs

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        return self.validate()

    def step(self, step: int) -> StepResult:
        """1. draw `dpo.batch_size` pairs → 2. reference log-probs → 3. one optimizer step."""
        cfg = self.cfg
        # 1. the step's pairs
        pairs = [self.train_pairs[i] for i in self.sampler.next_indices(cfg.dpo.batch_size)]
        batch = pair_batch(pairs, self.pad_id)

        # 2. the reference's log-probs of chosen and rejected
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        batch.set(REF_LOGPROBS, self._logprobs(self.reference, batch, self.ref_method))
        forward_s = time.perf_counter() - t0

        # 3. one optimizer step on the preference loss
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.actor.call(DPOTrainWorker.dpo_step, batch, self.args)[0]
        return StepResult(
            {
                "step": step,
                **{
                    k if k.startswith(("rewards/", "logps/")) else f"actor/{k}": v
                    for k, v in out.items()
                },
                "data/response_length": float(batch[RESPONSE_MASK].sum(dim=1).mean()),
                "time/forward_s": forward_s,
                "time/train_s": time.perf_counter() - t0,
            }
        )

    def _logprobs(
        self,
        cluster: Cluster,
        batch,  # noqa: ANN001
        method: Method = ReferenceWorker.compute_logprobs,
    ) -> torch.Tensor:
        # micro_batch_size counts pairs; a pair is two rows
        train = self.cfg.train
        return cluster.dispatch(
            method,
            batch,
            micro_batch_size=2 * train.micro_batch_size,
            max_tokens=train.micro_batch_tokens,
        )

    def validate(self) -> dict[str, float]:
        dpo = self.cfg.dpo
        self.ctl.phase("validate")
        t0 = time.perf_counter()
        if self.val_ref is None:
            self.val_ref = self._logprobs(self.reference, self.val_batch, self.ref_method)
        mask = self.val_batch[RESPONSE_MASK]
        average = dpo.loss == "ipo"
        policy = self._logprobs(self.actor, self.val_batch)
        pi = pair_scores(policy, mask, average)
        ref = pair_scores(self.val_ref, mask, average)
        _, out = dpo_loss(
            pi[:, 0],
            pi[:, 1],
            ref[:, 0],
            ref[:, 1],
            beta=dpo.beta,
            loss_type=dpo.loss,
            label_smoothing=dpo.label_smoothing,
        )
        likely = pair_scores(policy, mask, False)
        accuracy = float((likely[:, 0] > likely[:, 1]).float().mean())
        self.run.log_event(
            f"validation: preference accuracy {accuracy:.3f} on {len(pi)} held-out pairs "
            f"(implicit-reward accuracy {out['rewards/accuracy']:.3f})"
        )
        return {
            "val/accuracy": accuracy,
            **{f"val/{k}": v for k, v in out.items()},
            "time/validate_s": time.perf_counter() - t0,
        }

    # ---- checkpoints -----------------------------------------------------------------
    def checkpoint(self, step: int) -> None:
        save_sampler(self.ctl, step, self.sampler)

    def restore(self, checkpoint: Path | None) -> int:
        self.sampler, step = restore_sampler(
            self.ctl, checkpoint, len(self.train_pairs), self.cfg.seed
        )
        return step

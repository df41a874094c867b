"""Logit distillation workers: the teacher (forward only) and the student (trained).

The teacher sends, per row, its logits at the row's loss tokens: `[n, k]` top-k logits and
their token ids, or `[n, V]` full logits when `top_k` is 0. Rows travel as a batch field
(`teacher`), so they follow their rows through any micro-batching.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from rollcli.algorithms.distill_loss import distill_loss, student_on_support, token_divergence
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import TEACHER
from rollcli.data.packing import sequence_micro_batches
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.hf_sequence import split_rows, target_logits
from rollcli.strategies.sampling import SamplingParams
from rollcli.strategies.threads import set_threads
from rollcli.workers.generation import generate_texts
from rollcli.workers.sft_train import SFTTrainWorker


@dataclass(frozen=True)
class DistillArgs:
    loss: str = "forward_kl"
    temperature: float = 1.0
    skew_alpha: float = 0.1
    sft_weight: float = 0.0
    micro_batch_size: int = 4
    micro_batch_tokens: int | None = None


@dataclass(frozen=True)
class TeacherArgs:
    """The teacher's model (the recipe's; forward only, on the CPU) and its torch threads."""

    model_path: str
    num_threads: int = 1


class TeacherWorker:
    def __init__(self, args: TeacherArgs) -> None:
        set_threads(args.num_threads)
        self.model = load_causal_lm(args.model_path, train=False)
        self.tokenizer = load_tokenizer(args.model_path)

    @torch.no_grad()
    def teacher_logits(
        self,
        batch: Batch,
        micro_batch_size: int = 4,
        top_k: int = 0,
        micro_batch_tokens: int | None = None,
    ) -> list[dict[str, torch.Tensor | None]]:
        """Per row: `{"logits": [n, k or V], "ids": [n, k] or None}` at its loss tokens."""
        rows: list[dict[str, torch.Tensor | None]] = [{}] * len(batch)
        for idx, micro in sequence_micro_batches(batch, micro_batch_size, micro_batch_tokens):
            logits, _ = target_logits(self.model, micro)
            if top_k:
                values, ids = logits.topk(top_k, dim=-1)
                parts = zip(split_rows(values, micro), split_rows(ids, micro), strict=True)
            else:
                parts = ((piece, None) for piece in split_rows(logits, micro))
            for row, (values, ids) in zip(idx.tolist(), parts, strict=True):
                rows[row] = {"logits": values.clone(), "ids": None if ids is None else ids.clone()}
        return rows

    @torch.no_grad()
    def eval_loss(
        self, batch: Batch, micro_batch_size: int = 4, micro_batch_tokens: int | None = None
    ) -> dict[str, float]:
        from rollcli.workers.sft_train import sequence_nll

        return sequence_nll(self.model, batch, micro_batch_size, micro_batch_tokens)

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
        return generate_texts(self.model, self.tokenizer, prompts, params)


def _teacher_targets(micro: Batch) -> tuple[torch.Tensor, torch.Tensor | None]:
    rows = micro[TEACHER]
    logits = torch.cat([r["logits"] for r in rows])
    ids = None if rows[0]["ids"] is None else torch.cat([r["ids"] for r in rows])
    return logits, ids


class StudentWorker(SFTTrainWorker):
    """Trained on the teacher's logits (`distill_step`) or, across tokenizers, on its
    answers (`sft_step`, inherited)."""

    def distill_step(self, batch: Batch, args: DistillArgs) -> dict[str, float]:
        """One optimizer step on `(1 - sft_weight) * distill + sft_weight * NLL`, token means
        over the batch's loss tokens (the teacher's logits in the `teacher` field)."""
        total = max(int(batch.meta["targets"]), 1)
        rows = len(batch)
        micro_batches = functools.partial(
            sequence_micro_batches, max_tokens=args.micro_batch_tokens
        )
        n_micro = len(micro_batches(batch, args.micro_batch_size))

        def loss_fn(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
            logits, labels = target_logits(self.model, micro)
            teacher, ids = _teacher_targets(micro)
            student = logits if ids is None else student_on_support(logits, ids)
            # token sums over the micro-batch, divided by the batch's token count: with the
            # trainer's row weighting and metric averaging, the step sees exact token means
            kd_sum = (
                len(labels)
                * distill_loss(
                    student,
                    teacher,
                    kind=args.loss,
                    temperature=args.temperature,
                    skew_alpha=args.skew_alpha,
                )[0]
            )
            nll_sum = F.cross_entropy(logits.float(), labels, reduction="sum")
            w = args.sft_weight
            loss = ((1 - w) * kd_sum + w * nll_sum) / total * (rows / len(micro))
            scale = n_micro / total
            return loss, {
                "loss": float(((1 - w) * kd_sum + w * nll_sum).detach()) * scale,
                "distill_loss": float(kd_sum.detach()) * scale,
                "nll": float(nll_sum.detach()) * scale,
            }

        return self.trainer.update(
            batch,
            loss_fn=loss_fn,
            mini_batch_size=None,
            micro_batch_size=args.micro_batch_size,
            micro_batches=micro_batches,
        )

    @torch.no_grad()
    def eval_distill(
        self, batch: Batch, micro_batch_size: int = 4, micro_batch_tokens: int | None = None
    ) -> dict[str, float]:
        """Held-out `kl` (forward KL to the teacher's full distribution, temperature 1,
        the `teacher` field holding full logits) and `loss` (the student's NLL)."""
        self.model.eval()
        kl, nll, count = 0.0, 0.0, 0
        for _, micro in sequence_micro_batches(batch, micro_batch_size, micro_batch_tokens):
            logits, labels = target_logits(self.model, micro)
            teacher, _ = _teacher_targets(micro)
            kl += float(token_divergence(logits, teacher, "forward_kl").sum())
            nll += float(F.cross_entropy(logits.float(), labels, reduction="sum"))
            count += len(labels)
        return {"kl": kl / max(count, 1), "loss": nll / max(count, 1)}

"""The distillation pipeline: a student learns from the teacher.

Logit mode (same tokenizer): draw samples → pack → teacher logits at the assistant tokens
(teacher worker, forward only; top-k or full) → train the student (divergence, optionally
mixed with the NLL) → validate (held-out KL to the teacher, NLL, greedy accuracy).

Sequence mode (any tokenizers): draw prompts → the teacher answers them → SFT the student
on those answers → validate (the student's NLL of the teacher's greedy held-out answers,
greedy accuracy).

On-policy mode (same tokenizer): draw prompts → the student samples an answer to each with
its current weights (on its own worker: no inference engine, so no weight sync) → teacher
logits at every sampled token → train the student on the per-token divergence (reverse KL
in the recipe) → validate as in logit mode.

The recipe's `model` is the teacher. The student is `distill.student`, or a copy of the
teacher with fewer layers built into the run folder (`student-init/`) at the first start.
Checkpoints hold the student.
"""

from __future__ import annotations

import time
from pathlib import Path

from rollcli.config.errors import ConfigError
from rollcli.config.recipe import DistillRecipe
from rollcli.data.batch import Batch
from rollcli.data.batch_keys import TEACHER
from rollcli.data.offline_sets import (
    generation_prompts,
    prompt_ids,
    tokenize_chats,
    with_answers,
)
from rollcli.data.packing import response_sample, sequence_batch
from rollcli.data.prepared import chat_data
from rollcli.data.sampler import PromptSampler
from rollcli.distributed.cluster import Cluster
from rollcli.evaluation.answer_check import recipe_accuracy
from rollcli.pipelines.protocol import StepResult
from rollcli.pipelines.sampler_checkpoint import restore_sampler, save_sampler
from rollcli.runtime.run_control import RunControl, report_data_notes
from rollcli.runtime.workers_setup import start_clusters
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.distill import DistillArgs, StudentWorker, TeacherWorker


class DistillPipeline:
    engine = "hf"  # no inference engine: the student and the teacher generate themselves

    def __init__(self, cfg: DistillRecipe, ctl: RunControl, model_path: str) -> None:
        self.cfg = cfg
        self.ctl = ctl
        self.run = ctl.run
        self.teacher_path = model_path
        self.val_teacher: list[dict] | None = None  # the teacher never changes: score it once
        self.val_batch: Batch | None = None

    # ---- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        cfg, d = self.cfg, self.cfg.distill
        self.ctl.ui.phase("preparing the student")
        self.student_path = str(self._student())
        tokenizer = load_tokenizer(self.student_path)
        teacher_tokenizer = load_tokenizer(self.teacher_path)
        self.mode = _distill_mode(d.mode, tokenizer, teacher_tokenizer)
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id
        self.ctl.ui.phase("loading data")
        data = chat_data(cfg.data, cfg.seed, tokenizer, d.max_tokens, "distill.max_tokens")
        report_data_notes(self.ctl, data.notes)
        train, val = data.train, data.val
        if self.mode in ("logits", "on_policy"):  # held-out KL to the teacher on the answers
            self.val_batch = sequence_batch(data.val_samples, self.pad_id, d.max_tokens, d.packing)
        if self.mode == "logits":
            self.train_samples = data.train_samples
        elif self.mode == "on_policy":  # the student answers the prompts itself
            self.train_examples = train
            self.train_prompt_ids = prompt_ids(tokenizer, train)
            _check_room(self.train_prompt_ids, cfg.rollout.max_new_tokens, d.max_tokens)
        else:  # the teacher answers the prompts in its own tokens; the student learns the text
            self.train_examples, self.val_all = train, val
            self.train_prompt_ids = prompt_ids(teacher_tokenizer, train)
            self.val_teacher_prompt_ids = prompt_ids(teacher_tokenizer, val)
        self.val_examples, self.val_prompt_ids = (
            generation_prompts(tokenizer, val) if d.val_generate else ([], [])
        )
        self.num_train = len(train)
        self.sampler = PromptSampler(self.num_train, cfg.seed)
        self.args = DistillArgs(
            loss=d.loss,
            temperature=d.temperature,
            skew_alpha=d.skew_alpha,
            sft_weight=d.sft_weight,
            micro_batch_size=cfg.train.micro_batch_size,
            micro_batch_tokens=cfg.train.micro_batch_tokens,
        )
        self.start_workers()
        self.run.log_event(
            f"workers ready: {MODE_NAMES[self.mode]}, student {self.student_path}, "
            f"{len(train)} train / {len(val)} validation conversations"
        )

    def _student(self) -> Path:
        from rollcli.models.loading import resolve_model
        from rollcli.models.student import build_student

        d = self.cfg.distill
        if d.student is not None:
            return resolve_model(d.student)
        try:
            return build_student(
                self.teacher_path, d.student_layers, self.run.root / "student-init"
            )
        except ValueError as exc:
            raise ConfigError(f"distill.student_layers: {exc}") from None

    def start_workers(self) -> None:
        clusters = start_clusters(
            self.cfg, self.ctl, model_path=self.teacher_path, student_path=self.student_path
        )
        self.student, self.teacher = clusters["actor_train"], clusters["teacher"]

    # ---- the step (the loop is driver.drive) ------------------------------------------
    def baseline(self) -> dict[str, float]:
        """The untrained student's validation and the teacher's numbers it aims for."""
        return {**self.validate(), **self.teacher_baseline()}

    def step(self, step: int) -> StepResult:
        """Logit mode: 1. draw `distill.batch_size` samples and pack them → 2. the teacher's
        logits at the assistant tokens → 3. train the student. (On-policy and sequence
        mode: `_on_policy_step`, `_sequence_step`.)"""
        cfg = self.cfg
        if self.mode == "sequence":
            return self._sequence_step(step)
        if self.mode == "on_policy":
            return self._on_policy_step(step)
        # 1. the step's samples, packed into rows
        samples = [self.train_samples[i] for i in self.sampler.next_indices(cfg.distill.batch_size)]
        batch = sequence_batch(samples, self.pad_id, cfg.distill.max_tokens, cfg.distill.packing)

        # 2. the teacher's logits (top-k or full)
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        batch.set(TEACHER, self._teacher_logits(batch, cfg.distill.top_k))
        forward_s = time.perf_counter() - t0

        # 3. one optimizer step of the student on the divergence
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.student.call(StudentWorker.distill_step, batch, self.args)[0]
        return StepResult(
            {
                "step": step,
                **{f"actor/{k}": v for k, v in out.items()},
                "data/rows": float(len(batch)),
                "data/loss_tokens": float(batch.meta["targets"]),
                "time/forward_s": forward_s,
                "time/train_s": time.perf_counter() - t0,
            }
        )

    def _on_policy_step(self, step: int) -> StepResult:
        """1. the student answers `distill.batch_size` prompts with its current weights →
        2. the teacher scores every answer token → 3. the student steps on the divergence
        there."""
        cfg, d, r = self.cfg, self.cfg.distill, self.cfg.rollout
        # 1. the student's answers
        indices = self.sampler.next_indices(d.batch_size)
        prompts = [self.train_prompt_ids[i] for i in indices]
        self.ctl.phase("generate")
        t0 = time.perf_counter()
        params = SamplingParams(
            n=1,
            max_new_tokens=r.max_new_tokens,
            temperature=r.temperature,
            top_p=r.top_p,
            top_k=r.top_k,
            seed=cfg.seed * 100_003 + step,
        )
        gens = _by_prompt(self.student.call(StudentWorker.generate, prompts, params)[0])
        generate_s = time.perf_counter() - t0
        samples = [response_sample(p, g["token_ids"]) for p, g in zip(prompts, gens, strict=True)]
        batch = sequence_batch(samples, self.pad_id, d.max_tokens, d.packing)

        # 2. the teacher's logits at every sampled token
        self.ctl.phase("forward")
        t0 = time.perf_counter()
        batch.set(TEACHER, self._teacher_logits(batch, d.top_k))
        forward_s = time.perf_counter() - t0

        # 3. one optimizer step of the student on the per-token divergence
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.student.call(StudentWorker.distill_step, batch, self.args)[0]
        metrics = {
            "step": step,
            **{f"actor/{k}": v for k, v in out.items()},
            "data/rows": float(len(batch)),
            "data/loss_tokens": float(batch.meta["targets"]),
            "response/length": sum(len(g["token_ids"]) for g in gens) / len(gens),
            "response/finished": sum(bool(g["finished"]) for g in gens) / len(gens),
            "time/generate_s": generate_s,
            "time/forward_s": forward_s,
            "time/train_s": time.perf_counter() - t0,
        }
        rows = [
            {
                "id": self.train_examples[i].id,
                "prompt": self.train_examples[i].prompt_messages[-1]["content"],
                "response": g["text"],
                "token_ids": g["token_ids"],
                "finished": g["finished"],
            }
            for i, g in zip(indices, gens, strict=True)
        ]
        return StepResult(metrics, rows)

    def _sequence_step(self, step: int) -> StepResult:
        """1. the teacher answers `distill.batch_size` prompts → 2. SFT the student on the
        answers, in its own tokens."""
        cfg, d = self.cfg, self.cfg.distill
        # 1. the teacher's answers
        indices = self.sampler.next_indices(d.batch_size)
        self.ctl.phase("generate")
        t0 = time.perf_counter()
        examples = [self.train_examples[i] for i in indices]
        gens = self._teacher_answers(
            [self.train_prompt_ids[i] for i in indices], d.sample_temperature, step
        )
        generate_s = time.perf_counter() - t0
        batch = self._answer_batch(examples, [g["text"] for g in gens])

        # 2. one SFT step of the student on the teacher's answers
        self.ctl.phase("train")
        t0 = time.perf_counter()
        out = self.student.call(StudentWorker.sft_step, batch, **cfg.train.micro_batching)
        metrics = {
            "step": step,
            **{f"actor/{k}": v for k, v in out[0].items()},
            "data/rows": float(len(batch)),
            "data/loss_tokens": float(batch.meta["targets"]),
            "response/length": sum(len(g["token_ids"]) for g in gens) / len(gens),
            "time/generate_s": generate_s,
            "time/train_s": time.perf_counter() - t0,
        }
        samples = [
            {"id": ex.id, "prompt": ex.prompt_messages[-1]["content"], "response": g["text"]}
            for ex, g in zip(examples, gens, strict=True)
        ]
        return StepResult(metrics, samples)

    def _teacher_answers(self, prompts: list[list[int]], temperature: float, step: int) -> list:
        params = SamplingParams(
            n=1,
            max_new_tokens=self.cfg.rollout.max_new_tokens,
            temperature=temperature,
            seed=self.cfg.seed * 100_003 + step,
        )
        return _by_prompt(self.teacher.call(TeacherWorker.generate, prompts, params)[0])

    def _answer_batch(self, examples: list, answers: list[str]) -> Batch:
        """The examples answered by the teacher, in the student's tokens."""
        d = self.cfg.distill
        samples, _ = tokenize_chats(self.tokenizer, with_answers(examples, answers), d.max_tokens)
        return sequence_batch(samples, self.pad_id, d.max_tokens, d.packing)

    def _teacher_logits(self, batch: Batch, top_k: int) -> list[dict]:
        micro = self.cfg.train.micro_batching
        return self.teacher.dispatch(TeacherWorker.teacher_logits, batch, **micro, top_k=top_k)

    def validate(self) -> dict[str, float]:
        self.ctl.phase("validate")
        t0 = time.perf_counter()
        if self.mode == "sequence":
            return self._validate_sequence(t0)
        if self.val_teacher is None:
            self.val_teacher = self._teacher_logits(self.val_batch, top_k=0)
        val = Batch(dict(self.val_batch.tensors), {TEACHER: self.val_teacher}, self.val_batch.meta)
        out = self.student.call(StudentWorker.eval_distill, val, **self.cfg.train.micro_batching)[0]
        metrics = {"val/kl": out["kl"], "val/loss": out["loss"]}
        if self.val_examples:
            metrics.update({f"val/{k}": v for k, v in self._accuracy(self.student).items()})
        self.ctl.run.log_event(
            f"validation: KL(teacher || student) {out['kl']:.4f}, student loss {out['loss']:.4f}"
            + (f", accuracy {metrics['val/accuracy']:.3f} (greedy)" if self.val_examples else "")
        )
        metrics["time/validate_s"] = time.perf_counter() - t0
        return metrics

    def _validate_sequence(self, t0: float) -> dict[str, float]:
        if self.val_batch is None:  # the teacher's greedy held-out answers, once
            gens = self._teacher_answers(self.val_teacher_prompt_ids, 0.0, 0)
            self.val_batch = self._answer_batch(self.val_all, [g["text"] for g in gens])
        micro = self.cfg.train.micro_batching
        out = self.student.call(StudentWorker.eval_loss, self.val_batch, **micro)[0]
        metrics = {"val/loss": out["loss"]}
        if self.val_examples:
            metrics.update({f"val/{k}": v for k, v in self._accuracy(self.student).items()})
        self.ctl.run.log_event(
            f"validation: student loss on the teacher's answers {out['loss']:.4f}"
            + (f", accuracy {metrics['val/accuracy']:.3f} (greedy)" if self.val_examples else "")
        )
        metrics["time/validate_s"] = time.perf_counter() - t0
        return metrics

    def teacher_baseline(self) -> dict[str, float]:
        """What the student is measured against (step 0 only): the teacher's held-out NLL
        and greedy accuracy."""
        metrics = {}
        if self.mode != "sequence":  # across tokenizers the teacher's NLL is not comparable
            micro = self.cfg.train.micro_batching
            out = self.teacher.call(TeacherWorker.eval_loss, self.val_batch, **micro)[0]
            metrics["val/teacher_loss"] = out["loss"]
        if self.val_examples:
            metrics["val/teacher_accuracy"] = self._accuracy(self.teacher)["accuracy"]
        return metrics

    def _accuracy(self, cluster: Cluster) -> dict[str, float]:
        return recipe_accuracy(cluster, self.cfg, self.val_examples, self.val_prompt_ids)

    # ---- checkpoints -----------------------------------------------------------------
    def checkpoint(self, step: int) -> None:
        save_sampler(self.ctl, step, self.sampler)

    def restore(self, checkpoint: Path | None) -> int:
        self.sampler, step = restore_sampler(self.ctl, checkpoint, self.num_train, self.cfg.seed)
        return step


MODE_NAMES = {
    "logits": "logit-level distillation",
    "sequence": "sequence-level distillation (the student's tokenizer differs)",
    "on_policy": "on-policy distillation (the student samples, the teacher scores its tokens)",
}


def _distill_mode(mode: str, student, teacher) -> str:  # noqa: ANN001
    """`logits`, `sequence` or `on_policy`: `auto` picks logits when the vocabularies agree."""
    same = student.get_vocab() == teacher.get_vocab()
    if mode == "auto":
        return "logits" if same else "sequence"
    if mode in ("logits", "on_policy") and not same:
        raise ConfigError(
            f"distill.mode = {mode!r} needs the same tokenizer, and distill.student has another "
            "one than the teacher; set distill.mode=sequence (or auto) to train the student on "
            "the teacher's answers instead (sequence-level distillation)"
        )
    return mode


def _check_room(prompts: list[list[int]], max_new_tokens: int, max_tokens: int) -> None:
    """Every prompt with a full-length answer fits a row of `distill.max_tokens` tokens."""
    longest = max(len(p) for p in prompts)
    if longest + max_new_tokens > max_tokens:
        raise ConfigError(
            f"distill.max_tokens = {max_tokens} is too short for the longest prompt ({longest} "
            f"tokens) plus rollout.max_new_tokens = {max_new_tokens}; raise distill.max_tokens "
            f"to at least {longest + max_new_tokens}"
        )


def _by_prompt(gens: list[dict]) -> list[dict]:
    return sorted(gens, key=lambda g: g["prompt_index"])

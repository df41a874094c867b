"""The sections of the offline pipelines: `sft`, `dpo` and `distill`."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from rollcli.config.sections import NonNegInt, PositiveFloat, PositiveInt, Section


class SFTConfig(Section):
    """Supervised fine-tuning (`pipeline: sft`): loss on the assistant tokens only."""

    batch_size: PositiveInt = 32  # samples (conversations) per optimizer step
    max_tokens: PositiveInt = 512  # longest sample (longer ones are cut), and the packed row width
    packing: bool = True  # several short samples per row, attention kept within each
    val_generate: bool = True  # greedy answers to the held-out prompts, scored by reward.fn


class DPOConfig(Section):
    """Direct preference optimisation (`pipeline: dpo`) against a frozen reference.

    `loss`: `sigmoid` (Rafailov et al. 2023), `ipo` (Azar et al. 2023), `cdpo` (conservative
    DPO: the sigmoid loss with `label_smoothing`, the chance that a label is flipped).
    """

    loss: Literal["sigmoid", "ipo", "cdpo"] = "sigmoid"
    beta: PositiveFloat = 0.1
    label_smoothing: Annotated[float, Field(ge=0, lt=0.5)] = 0.0
    batch_size: PositiveInt = 16  # preference pairs per optimizer step
    max_response_tokens: PositiveInt = 128  # chosen / rejected responses are cut to this

    @model_validator(mode="after")
    def _smoothing_only_for_cdpo(self) -> DPOConfig:
        if self.loss == "cdpo" and self.label_smoothing == 0:
            raise ValueError(
                "dpo.loss is 'cdpo' but dpo.label_smoothing is 0; set it, e.g. "
                "dpo.label_smoothing=0.1 (0 is plain sigmoid DPO)"
            )
        if self.loss != "cdpo" and self.label_smoothing > 0:
            raise ValueError(
                f"dpo.label_smoothing = {self.label_smoothing} applies to dpo.loss=cdpo only "
                f"(dpo.loss is {self.loss!r})"
            )
        return self


class DistillConfig(Section):
    """Distillation (`pipeline: distill`): the recipe's `model` is the teacher.

    The student is `student` (any causal LM) or, when unset, a copy of the teacher keeping
    `student_layers` of its layers, evenly spaced. `mode`: `logits` (match the teacher's
    next-token distributions on the data's answers; needs the same tokenizer), `sequence`
    (SFT on the teacher's answers: works across tokenizers), `on_policy` (match the teacher's
    distributions on the student's own samples; the same tokenizer), `auto` (logits when
    the vocabularies agree, else sequence).
    """

    mode: Literal["auto", "logits", "sequence", "on_policy"] = "auto"
    sample_temperature: Annotated[float, Field(ge=0)] = 0.0  # sequence mode; 0 = greedy
    student: str | None = None
    student_layers: PositiveInt | None = None  # None: a third of the teacher's layers
    loss: Literal["forward_kl", "reverse_kl", "js", "skew_forward_kl", "skew_reverse_kl"] = (
        "forward_kl"
    )
    temperature: PositiveFloat = 1.0
    top_k: NonNegInt = 0  # teacher logits sent per token; 0 = the whole vocabulary
    skew_alpha: Annotated[float, Field(gt=0, lt=1)] = 0.1  # mixing weight of the skewed KLs
    sft_weight: Annotated[float, Field(ge=0, le=1)] = 0.0  # loss = (1-w) distill + w NLL
    batch_size: PositiveInt = 16  # samples per optimizer step
    max_tokens: PositiveInt = 512
    packing: bool = True
    val_generate: bool = True

    @model_validator(mode="after")
    def _one_student(self) -> DistillConfig:
        if self.student is not None and self.student_layers is not None:
            raise ValueError(
                "distill.student_layers builds a student from the teacher, and distill.student "
                "names a ready one; set only one of them"
            )
        if self.mode == "on_policy":
            if self.sft_weight > 0:
                raise ValueError(
                    "distill.sft_weight mixes in the NLL of the data's answers, and "
                    "distill.mode=on_policy trains on the student's own samples, not on the "
                    "data's answers; remove distill.sft_weight"
                )
            if self.sample_temperature > 0:
                raise ValueError(
                    "distill.sample_temperature is the teacher's sampling in sequence mode; "
                    "with distill.mode=on_policy the student samples at rollout.temperature, "
                    "so set that instead"
                )
        return self

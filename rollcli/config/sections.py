"""Typed, frozen sections of a recipe (everything except `algorithm`, see algorithm.py).

Each section forbids unknown keys, so a misspelled key fails before anything starts. Only
pipeline setup reads these objects; workers, losses and envs take flat arguments.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DataConfig(Section):
    """Where prompts come from.

    `source: reasoning_gym` draws seeded problems from a reasoning-gym generator (`task` and
    `task_args`); `source: file` reads `train_path` / `val_path` (jsonl or parquet, one
    object a line with `prompt` or `messages`, `answer`, optional `tag`).
    """

    source: Literal["reasoning_gym", "file"] = "reasoning_gym"
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    train_path: str | None = None
    val_path: str | None = None
    train_size: PositiveInt = 2000
    val_size: PositiveInt = 64
    system_prompt: str | None = None
    prompt_suffix: str = ""
    max_prompt_tokens: PositiveInt = 256

    @model_validator(mode="after")
    def _file_needs_path(self) -> DataConfig:
        if self.source == "file" and not self.train_path:
            raise ValueError("data.source is 'file' but data.train_path is not set")
        return self


class RolloutConfig(Section):
    """Generation: prompts per step, samples per prompt, sampling parameters.

    `engine: auto` is `vllm` when vLLM is installed (`make vllm`), else `hf`.
    """

    engine: Literal["auto", "hf", "vllm"] = "auto"
    vllm_dtype: Literal["float32", "bfloat16"] = "float32"  # float32: samples match the trainer
    vllm_kv_cache_gib: PositiveFloat = 1.0  # on CPU; VLLM_CPU_KVCACHE_SPACE wins when set
    batch_size: PositiveInt = 64  # samples per step = prompts per step x group_size
    group_size: PositiveInt = 8
    max_new_tokens: PositiveInt = 64
    temperature: Annotated[float, Field(ge=0)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: NonNegInt = 0
    val_max_new_tokens: PositiveInt | None = None
    num_workers: PositiveInt = 1

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.group_size


class TrainConfig(Section):
    """Policy optimisation (actor_train)."""

    strategy: Literal["hf"] = "hf"
    steps: PositiveInt = 20
    lr: PositiveFloat = 1e-6
    warmup_steps: NonNegInt = 0
    weight_decay: Annotated[float, Field(ge=0)] = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    mini_batch_size: PositiveInt | None = None  # samples per optimizer step; None = whole batch
    micro_batch_size: PositiveInt = 8  # samples per forward/backward
    grad_clip: PositiveFloat | None = 1.0
    gradient_checkpointing: bool = False
    num_workers: PositiveInt = 1


class CriticConfig(Section):
    """Value model (started only when the algorithm needs one, e.g. ppo with gae)."""

    lr: PositiveFloat = 1e-5
    micro_batch_size: PositiveInt = 8
    grad_clip: PositiveFloat | None = 1.0


class RewardConfig(Section):
    """Reward function by name (`math`) or as `package.module:function`."""

    fn: str = "math"
    format_weight: Annotated[float, Field(ge=0, le=1)] = 0.1
    num_workers: PositiveInt = 1
    timeout_s: PositiveFloat = 10.0


class ResourcesConfig(Section):
    gpus: NonNegInt = 0
    ray_address: str | None = None
    num_cpus: PositiveFloat | None = None  # default: all cores of this machine


class RunConfig(Section):
    runs_dir: str = "runs"
    run_id: str | None = None
    save_every: NonNegInt = 0  # 0 = only at the end
    eval_every: NonNegInt = 5  # 0 = only at start and end
    keep_last: PositiveInt = 2
    time_limit_min: Annotated[float, Field(ge=0)] = (
        0  # stop after the step that crosses it; 0 = none
    )
    tensorboard: bool = True
    save_samples: bool = True
    max_restarts: NonNegInt = 3  # workers that die are restarted from the newest checkpoint


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
    """Logit distillation (`pipeline: distill`): the recipe's `model` is the teacher.

    The student is `student` (a model with the same tokenizer) or, when unset, a copy of the
    teacher keeping `student_layers` of its layers, evenly spaced.
    """

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
        return self

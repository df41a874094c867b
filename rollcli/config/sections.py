"""Typed, frozen sections of a recipe (everything except `algorithm`, see algorithm.py): the
base `Section` and the `rollout`, `train` (with `lora`), `critic`, `resources` and `run`
sections; `data`, `reward`, `agentic`, `devices` and the offline pipelines' sections have
modules of their own (`*_section.py`, `offline_sections.py`).

Each section forbids unknown keys, so a misspelled key fails before anything starts. Only
pipeline setup reads these objects; workers, losses and envs take flat arguments.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rollcli.config.strategy_spec import ENGINE_CHOICES, STRATEGY_CHOICES, strategy_spec

if TYPE_CHECKING:  # the names come from the strategy table, at run time
    EngineName = str
    StrategyName = str
else:
    EngineName = Literal[ENGINE_CHOICES]
    StrategyName = Literal[STRATEGY_CHOICES]

PositiveInt = Annotated[int, Field(gt=0)]
NonNegInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RolloutConfig(Section):
    """Generation: prompts per step, samples per prompt, sampling parameters.

    `engine: auto` is `vllm` when vLLM is installed (`make vllm`), else `hf`.
    """

    engine: EngineName = "auto"  # sglang: GPU only
    # the weights the engine generates with (the trainer keeps its own): auto is fp32 on CPU
    # (samples match the fp32 trainer) and bf16 on GPUs (the plan's); int8: the hf engine's
    # int8 linears on CPU, re-quantized after every weight sync (docs/performance.md)
    precision: Literal["auto", "fp32", "bf16", "int8", "fp8"] = "auto"
    vllm_kv_cache_gib: PositiveFloat = 1.0  # on CPU; VLLM_CPU_KVCACHE_SPACE wins when set
    batch_size: PositiveInt = 64  # samples per step = prompts per step x group_size
    group_size: PositiveInt = 8
    max_new_tokens: PositiveInt = 64
    temperature: Annotated[float, Field(ge=0)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: NonNegInt = 0
    val_max_new_tokens: PositiveInt | None = None
    num_workers: PositiveInt = 1
    # the rollout scheduler: groups per generation request (0: one request per actor_infer
    # rank, two with dynamic sampling), dynamic sampling's first-round over-sampling, async
    # rollout's lead in steps
    request_groups: NonNegInt = 0
    oversample: Annotated[float, Field(ge=1, le=8)] = 1.0
    max_staleness: Annotated[int, Field(ge=0, le=4)] = 0
    # the hf engine refills a decode row the step its sample ends (continuous batching)
    # instead of decoding a batch until its longest sample ends
    continuous_batching: bool = False
    # partial rollouts (rlvr, hf engine): a step trains on the groups that have ended and the
    # unfinished samples continue in later rollouts under newer weights; max_staleness
    # (>= 1) bounds each sample's oldest token (docs/performance.md)
    partial: bool = False

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.group_size

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        """`vllm_dtype` became `precision` (every engine's). A run saved before writes
        `vllm_dtype: auto` (as `precision`'s default): dropped, so the run still resumes;
        another value is refused with its new spelling."""
        if isinstance(data, dict) and data.get("vllm_dtype") == "auto":
            data = {k: v for k, v in data.items() if k != "vllm_dtype"}
        if isinstance(data, dict) and "vllm_dtype" in data:
            new = {"float32": "fp32", "bfloat16": "bf16"}.get(str(data["vllm_dtype"]), "fp32")
            raise ValueError(
                f"rollout.vllm_dtype is now rollout.precision (every engine's): "
                f"rollout.precision={new}"
            )
        return data


class LoraConfig(Section):
    """Low-rank adapters (Hu et al. 2021, "LoRA", arXiv:2106.09685) on the trained model,
    through peft: each target linear `W` becomes `W + (alpha / r) B A` with `A: [r, in]`
    and `B: [out, r]`, and only A and B are trained. See docs/lora.md.

    `target_modules`: module names (the last part of the name, e.g. `q_proj`), or
    `all-linear` (every linear layer but the LM head).
    """

    r: PositiveInt = 16
    alpha: PositiveFloat = 32.0
    dropout: Annotated[float, Field(ge=0, lt=1)] = 0.0
    target_modules: list[str] | Literal["all-linear"] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )

    @field_validator("target_modules", mode="before")
    @classmethod
    def _a_list_or_all_linear(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "all-linear":
            raise ValueError("give a list of module names, e.g. [q_proj, v_proj], or all-linear")
        return value

    @model_validator(mode="after")
    def _some_targets(self) -> LoraConfig:
        if isinstance(self.target_modules, list) and not self.target_modules:
            raise ValueError(
                "train.lora.target_modules is empty; name the linear layers to adapt, e.g. "
                "[q_proj, v_proj], or all-linear"
            )
        return self


class TrainConfig(Section):
    """Policy optimisation (actor_train).

    `strategy`: `auto` (`hf` wherever it fits, always on a CPU; on GPUs where it does not,
    the smallest change from the planner's advice that fits: `planning/auto_strategy.py`),
    `hf` (plain torch), `fsdp2` (torch's `fully_shard`: weights, gradients and Adam states
    sharded over the ranks, no extra package; `devices.actor_train.offload_params` is its
    CPU offload), `deepspeed` (ZeRO, `devices.actor_train.zero_stage`; the `deepspeed`
    extra) or `megatron` (refused until the Hugging Face to megatron-core weight map exists).
    Which pipeline takes which: `rollcli.config.capabilities`.
    `lora`: train low-rank adapters instead of every weight (`hf` or `fsdp2`; docs/lora.md).
    """

    strategy: StrategyName = "auto"
    # bf16-mixed: bf16 compute, fp32 master weights, Adam states and log-prob / loss
    # reductions (the reference holds bf16 weights); auto: bf16-mixed on GPUs and on a CPU
    # whose bf16 matmul beats fp32 at the model's shapes, else fp32 (planning/auto_precision.py)
    precision: Literal["auto", "fp32", "bf16-mixed"] = "auto"
    steps: PositiveInt = 20
    lr: PositiveFloat = 1e-6
    warmup_steps: NonNegInt = 0  # linear warm-up over this many optimizer steps
    # after warm-up: `constant`, or `linear` / `cosine` decay to `min_lr_ratio` x lr over the
    # last `lr_decay_steps` training steps (null: all of them); strategies/lr_schedule.py
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    lr_decay_steps: PositiveInt | None = None
    min_lr_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    weight_decay: Annotated[float, Field(ge=0)] = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    mini_batch_size: PositiveInt | None = None  # samples per optimizer step; None = whole batch
    micro_batch_size: PositiveInt = 8  # samples per forward/backward
    # at most this many (padded) tokens per forward/backward: long rows make smaller
    # micro-batches, so the logits (tokens x vocabulary, fp32) stay bounded; null = no limit
    micro_batch_tokens: PositiveInt | None = 4096
    grad_clip: PositiveFloat | None = 1.0
    gradient_checkpointing: bool = False
    num_workers: PositiveInt = 1
    lora: LoraConfig | None = None
    # each group's prompt computed once in the log-prob, value and training forwards and
    # backwards, with the same numbers (docs/performance.md); null: on for rlvr, else off
    shared_prefix: bool | None = None

    @property
    def micro_batching(self) -> dict[str, int | None]:
        """How a worker splits a batch into forwards and backwards (the keyword arguments
        of the sft and distill workers' steps and evaluations)."""
        return {
            "micro_batch_size": self.micro_batch_size,
            "micro_batch_tokens": self.micro_batch_tokens,
        }

    @model_validator(mode="after")
    def _shared_prefix_strategy(self) -> TrainConfig:
        if self.shared_prefix and not strategy_spec(self.strategy).shared_prefix:
            raise ValueError(
                "train.shared_prefix runs on train.strategy hf, fsdp2 or deepspeed, not megatron; "
                "set train.shared_prefix=false"
            )
        return self


class CriticConfig(Section):
    """Value model (started only when the algorithm needs one, e.g. ppo with gae)."""

    lr: PositiveFloat = 1e-5
    micro_batch_size: PositiveInt = 8
    grad_clip: PositiveFloat | None = 1.0


class ResourcesConfig(Section):
    gpus: NonNegInt = 0
    ray_address: str | None = None
    num_cpus: PositiveFloat | None = None  # default: all cores of this machine


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


class RunConfig(Section):
    """Where the run folder goes, its cadences and limits, and what it logs to.

    `trackers`: the trackers besides metrics.jsonl, which every run writes (roll logs, roll
    plot and resume read it; `jsonl` is added to the list when left out): `tensorboard`,
    `swanlab`, `wandb` (extras). SwanLab and W&B log offline into the run
    folder; `tracker_mode: online` (or WANDB_MODE / SWANLAB_MODE=online) logs to
    `tracker_project` online, which needs the tracker's API key (docs/runs.md).
    """

    runs_dir: str = "runs"
    run_id: str | None = None
    save_every: NonNegInt = 0  # 0 = only at the end
    # also a checkpoint once this many minutes passed since the last (0 = off): a preempted
    # job loses at most that much
    save_every_min: Annotated[float, Field(ge=0)] = 0
    eval_every: NonNegInt = 5  # 0 = only at start and end
    keep_last: PositiveInt = 2
    # `last`: checkpoints other than the newest drop their optimizer states (about 2/3 of
    # their size): still exportable and evaluable, no longer resumable (docs/runs.md)
    keep_optimizer: Literal["all", "last"] = "all"
    time_limit_min: Annotated[float, Field(ge=0)] = (
        0  # stop after the step that crosses it; 0 = none
    )
    trackers: tuple[str, ...] = ("jsonl", "tensorboard")
    tracker_mode: Literal["offline", "online"] = "offline"
    tracker_project: str = "roll"  # the online project (swanlab, wandb)
    save_samples: bool = True
    max_restarts: NonNegInt = 3  # workers that die are restarted from the newest checkpoint
    # a weight sync whose fingerprints differ (the engine would sample from stale weights)
    # stops the run; true: it is tried once more first (rollcli/distributed/sync_check.py)
    sync_retry: bool = False
    # stop (with a checkpoint) at the first collapse signal (rollcli/runs/collapse.py); the
    # signals are always written to events.log as warnings
    stop_on_collapse: bool = False
    # FLOP/s of one device that perf/*_mfu divides by; None: measured (docs/performance.md)
    peak_flops: PositiveFloat | None = None

    @model_validator(mode="before")
    @classmethod
    def _tensorboard_flag(cls, data: Any) -> Any:
        """`run.tensorboard: true|false` (recipes and runs from before `run.trackers`)."""
        if not isinstance(data, dict) or "tensorboard" not in data:
            return data
        data = dict(data)
        flag = data.pop("tensorboard")
        if "trackers" in data:
            raise ValueError(
                "run.tensorboard and run.trackers are both set; drop run.tensorboard "
                "(list tensorboard in run.trackers instead)"
            )
        data["trackers"] = ["jsonl", "tensorboard"] if flag else ["jsonl"]
        return data

    @field_validator("runs_dir")
    @classmethod
    def _a_folder(cls, runs_dir: str) -> str:
        """An empty runs_dir would put the run folder in the working directory."""
        if not runs_dir.strip():
            raise ValueError("give the folder that holds the run folders, e.g. runs")
        return runs_dir

    @field_validator("run_id")
    @classmethod
    def _folder_name(cls, run_id: str | None) -> str | None:
        """A run id names the run's folder, and users type it into `roll logs/resume`: no
        `/`, spaces, shell characters, nor `.` / `..`."""
        if run_id is None or RUN_ID.fullmatch(run_id):
            return run_id
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id).strip("-._")[:200] or "my-run"
        raise ValueError(
            "not a plain folder name: use letters, digits, '.', '_' and '-' (starting with "
            f"a letter or digit, at most 200), e.g. {safe!r}"
        )

    @field_validator("trackers")
    @classmethod
    def _jsonl_always(cls, trackers: tuple[str, ...]) -> tuple[str, ...]:
        """metrics.jsonl is the run's own record, written whatever the list says; the
        resolved recipe lists it first so that it says so."""
        return trackers if "jsonl" in trackers else ("jsonl", *trackers)

    @model_validator(mode="after")
    def _known_trackers(self) -> RunConfig:
        from rollcli.config.errors import did_you_mean
        from rollcli.config.trackers import ONLINE_TRACKERS, TRACKERS

        for name in self.trackers:
            if name not in TRACKERS:
                raise ValueError(
                    f"run.trackers: unknown tracker {name!r}{did_you_mean(name, list(TRACKERS))}; "
                    f"choose from {', '.join(TRACKERS)}"
                )
        if len(set(self.trackers)) < len(self.trackers):
            raise ValueError(f"run.trackers lists a tracker twice: {list(self.trackers)}")
        if self.tracker_mode == "online" and not set(self.trackers) & set(ONLINE_TRACKERS):
            raise ValueError(
                "run.tracker_mode is 'online' but run.trackers has no online tracker; add "
                f"one of {', '.join(ONLINE_TRACKERS)}, or drop run.tracker_mode"
            )
        return self

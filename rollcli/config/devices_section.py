"""The `devices` section of a recipe: the cluster shape and each role's placement."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rollcli.config.sections import NonNegInt, PositiveFloat, PositiveInt, Section


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
    memory; `host_mem_gib` each node's RAM, which holds what GPU roles offload (a CPU run is
    judged against this machine's). `async_mode`: rollout overlaps training, so actor_train
    and actor_infer need disjoint GPUs (implied on GPUs by `rollout.max_staleness > 0`). A
    role's key applies only where the recipe runs that role (`planning.role_table.roles_for`);
    agentic's validation environments are placed with `env`.
    """

    nodes: PositiveInt = 1
    num_gpus_per_node: NonNegInt = 0
    gpu_kind: str = "h100-80g"
    gpu_mem_gib: PositiveFloat | None = None
    host_mem_gib: PositiveFloat | None = None
    async_mode: bool = False
    actor_train: RolePlacement = Field(default_factory=RolePlacement)
    actor_infer: RolePlacement = Field(default_factory=RolePlacement)
    reference: RolePlacement = Field(default_factory=RolePlacement)
    critic: RolePlacement = Field(default_factory=RolePlacement)
    teacher: RolePlacement = Field(default_factory=RolePlacement)  # distill's teacher
    reward: RolePlacement = Field(default_factory=RolePlacement)
    env: RolePlacement = Field(default_factory=RolePlacement)

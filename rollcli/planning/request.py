"""What a plan is asked for: the model, the cluster and each role's parallel layout.

These are flat, typed arguments: the config layer builds them from a recipe, so nothing
here reads YAML. Role names are the role table's (`role_table.py`): the worker clusters'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rollcli.config.strategy_spec import ENGINE_NAMES, STRATEGY_NAMES
from rollcli.models.registry import ModelSpec
from rollcli.planning.devices import GiB
from rollcli.planning.role_table import names

TRAIN_ROLES = names("train")  # weights + grads + optimizer + activations
INFER_ROLES = names("infer")  # weights + KV cache
FORWARD_ROLES = names("forward")  # weights + forward activations
HOST_ROLES = names("none")  # no model: environments and rule rewards
ROLES = TRAIN_ROLES + INFER_ROLES + FORWARD_ROLES + HOST_ROLES

TRAIN_STRATEGIES = STRATEGY_NAMES  # the strategy table's rows (config/strategy_spec.py)
INFER_STRATEGIES = ENGINE_NAMES  # the engine table's rows


def default_strategy(role: str) -> str:
    if role in TRAIN_ROLES:
        return "deepspeed"
    if role in INFER_ROLES:
        return "vllm"
    return "hf"


@dataclass(frozen=True)
class RoleRequest:
    """One role's placement and parallel layout.

    device_mapping: "0-7", "0,1,2", [0, 1, 2, 3] or "cpu" (see `devices.py`).
    strategy: train roles deepspeed | fsdp2 | megatron | hf; actor_infer vllm | sglang |
        hf; None picks deepspeed, vllm or hf by role. megatron's distributed optimizer is
        zero_stage 1; fsdp2 is always fully sharded (stage 3) and its `offload_params`
        moves weights, gradients and optimizer states to host memory.
    seq_len: prompt + response tokens (the inference engine's max model length).
    prompt_len: the prompt's share of seq_len (the hf engine keeps the prefill's cache of
        the prompts while it fills its decode buffer).
    micro_batch: sequences per forward/backward (train) or forward (reference, reward).
    micro_batch_tokens: padded tokens per forward at most (`train.micro_batch_tokens`):
        the workers split a micro-batch of more into smaller ones (None: no budget).
    gpu_memory_utilization, max_num_seqs: the vLLM/SGLang engine's settings.
    precision: the precision its weights run in, a row of `config.precision_spec.PRECISIONS`
        (None: a request made by hand, judged by `param_bytes` alone); the workers get it.
    param_bytes: 2 for bf16/fp16 weights (mixed-precision Adam), 4 for fp32: from a recipe,
        the `weight_bytes` of `precision`'s row.
    offload_when_idle: a colocated role moves its states to host memory while another
        role on the same GPU computes (worker offload, vLLM sleep mode).
    model: the role's own model where it is not the plan's (distill's student).
    session_bytes: the hf engine's KV kept between an episode's turns (agentic's
        `agentic.turn_cache_mib`), on top of a step's decode buffers.
    shared_prefix: samples of one prompt packed in one row, the prompt once (rlvr's
        `train.shared_prefix`, `rollcli.data.shared_prefix`): a row of `shared_prefix`
        samples holds prompt_len + shared_prefix · (seq_len − prompt_len) tokens (1: none).
    chunked_head: the role scores tokens through roll's chunked LM head (every pipeline
        but distill, whose teacher and student exchange whole logits); on the CPU the plan
        then counts the head's buffers (`memory.chunked_head_bytes`), not `[b, s, V]` logits.
    lora_params: a trained role with LoRA: its adapter parameters (0: every weight
        trains); the frozen base then has no gradients or optimizer state.
    int8_copies: the hf engine's int8 rollout (`rollout.precision: int8`): beside its fp32
        weights it holds an int8 copy of every linear (`INT8_COPY_BYTES` per parameter).
    bf16_copies: the hf engine's bf16 rollout on a CPU: a bf16 copy of every linear beside
        its fp32 weights (`BF16_COPY_BYTES` per parameter).
    """

    role: str
    device_mapping: str | list[int]
    strategy: str | None = None
    tp: int = 1
    pp: int = 1
    zero_stage: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    micro_batch: int = 1
    micro_batch_tokens: int | None = None
    seq_len: int = 2048
    prompt_len: int = 0
    grad_checkpointing: bool = True
    gpu_memory_utilization: float = 0.8
    max_num_seqs: int = 256
    precision: str | None = None
    param_bytes: int = 2
    offload_when_idle: bool = True
    lora_params: int = 0
    chunked_head: bool = False
    shared_prefix: int = 1
    model: ModelSpec | None = None
    session_bytes: int = 0
    int8_copies: bool = False
    bf16_copies: bool = False

    @property
    def resolved_strategy(self) -> str:
        return self.strategy or default_strategy(self.role)


@dataclass(frozen=True)
class PlanInput:
    """The model, the cluster and the roles to place.

    num_gpus: GPUs in the whole cluster (0 plans a CPU run on the host).
    gpus_per_node: 0 means num_gpus // num_nodes.
    host_memory_bytes: host RAM, the capacity in a CPU plan (None: not judged).
    async_mode: rollout runs alongside training, so actor_train and actor_infer need
        their own GPUs.
    """

    model: ModelSpec
    num_gpus: int
    num_nodes: int = 1
    gpus_per_node: int = 0
    gpu_memory_bytes: int = 80 * GiB
    roles: list[RoleRequest] = field(default_factory=list)
    async_mode: bool = False
    host_memory_bytes: int | None = None

    @property
    def node_size(self) -> int:
        if self.gpus_per_node:
            return self.gpus_per_node
        return max(1, self.num_gpus // max(1, self.num_nodes))

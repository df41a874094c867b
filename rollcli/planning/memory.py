"""Per-GPU memory of one rank of a role, in bytes: pure arithmetic on model numbers.

Notation: Ψ parameters, N data-parallel ranks, t tensor-parallel and p pipeline-parallel
size, b micro-batch, s sequence length, h hidden size, L layers, V vocabulary.

Model states (training), after Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models" (arXiv:1910.02054), section 3.1: mixed
precision Adam keeps 16-bit weights (2Ψ) and gradients (2Ψ) plus K = 12 bytes/param of
optimizer state (fp32 master weights, momentum, variance). Per GPU, with Ψ' = Ψ/(t·p):

    stage 0 (DDP)                    2Ψ' + 2Ψ' + 12Ψ'
    stage 1 (optimizer partitioned)  2Ψ' + 2Ψ' + 12Ψ'/N
    stage 2 (+ gradients)            2Ψ' + (2 + 12)Ψ'/N
    stage 3 (+ parameters)           (2 + 2 + 12)Ψ'/N

fp32 training (param_bytes = 4) keeps no master copy: 4 + 4 + 8 bytes/param.
Optimizer offload (ZeRO-Offload, Ren et al. 2021) moves optimizer states and the
gradient partitions to host memory (stage 1 still holds its full gradients on GPU);
parameter offload (stage 3 only, ZeRO-Infinity) moves the weight partitions too.
DeepSpeed's own estimator also counts communication buffers and the largest layer
gathered under stage 3; we leave those out (a few percent for large models). DeepSpeed's
bf16 mode adds what the paper's K leaves out: the fp32 gradients its optimizer steps on
(4Ψ', partitioned like the optimizer states; `DEEPSPEED_FP32_GRAD_BYTES`). Measured on an
H100 (docs/gpu.md): without them the plan was 16-28% under torch's peak for ZeRO-2/3.

LoRA (Hu et al. 2021): the base weights are frozen, so they need no gradients or optimizer
state: param_bytes · Ψ' of weights, plus the adapters' own Ψ_A (`lora_param_count`) with
weights, gradients and Adam states as above (stage 0: adapters are small, no sharding;
`lora_params.py` counts them).

Activations: see `activation_bytes`. An inference rank (KV cache, the hf engine): see
`inference_memory.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from rollcli.models.registry import ModelSpec

# Measured on this build's CPU workers (docs/planning.md, "On the CPU"): the PSS
# of a Ray worker process before it holds a model (Python, torch, transformers, Ray's core
# worker, tokenizer), and of the driver process (the run's data and batches between stages).
CPU_PROCESS_BYTES = 240 * 2**20
CPU_DRIVER_BYTES = 400 * 2**20
# A GPU worker process's own host memory beside what it offloads (CUDA's libraries and
# context, torch, transformers): NOT measured in this build (the GPU proof kit's rows carry
# `host_peak_gib` for it); qwen2.5-7b's FSDP2 offload, whose states the plan puts at 127.7
# GiB, was killed on a 128 GiB host (docs/gpu.md, run 5).
GPU_PROCESS_HOST_BYTES = 3 * 2**30
# glibc keeps the blocks a training pass frees resident for reuse, and the pass's tensors of
# other sizes do not always fit them: a CPU training process peaked 0.1-0.3 of its
# activations above its live tensors (`bench/role_memory.py train`, beside the same run with
# `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072`, which returns every block at once but
# made the update 15-20% slower, so it is not used).
CPU_ALLOCATOR_SLACK = 0.3
# rollcli.strategies.lm_head's constants (no torch here; a test checks they agree)
HEAD_CHUNK_TOKENS = 256
KEEP_LOGITS_BYTES = 256 * 2**20
ADAM_MIXED_PRECISION_BYTES = 12  # the ZeRO paper's K: fp32 master + momentum + variance
DEEPSPEED_FP32_GRAD_BYTES = 4  # DeepSpeed bf16: the fp32 gradients of the master weights
# FSDP2's CPU offload still peaks on the GPU above its activations. An H100 measured 4.3
# bytes/param above them for qwen2.5-0.5b and 3.6 for 1.5b (docs/gpu.md run 3); the CUDA
# allocation history of run 4 (an H200) showed most of it to be the whole-response logits
# that every FSDP2 update keeps (`FSDP2_LOGITS_BYTES`, now counted): what remains is 0
# bytes/param for 0.5b and 2.2 for 1.5b, counted as 2 (fp32 gradient shards in flight to
# host memory, presumably; the mechanism is not confirmed and 7B+ is unmeasured)
FSDP2_OFFLOAD_GPU_GRAD_BYTES = 2
# The hf strategy in bf16-mixed trains fp32 weights under torch.autocast, whose cast cache
# keeps a bf16 copy of every decoder linear weight from its first use in a forward until the
# step's autocast region ends: measured on an H200 with the CUDA allocation history (qwen2.5-7b:
# 13.1 GB of bf16 weight copies at the peak; the plan without them was 0.90 of torch's peak
# for 3b and 7b, docs/gpu.md run 4)
AUTOCAST_WEIGHT_COPY_BYTES = 2
# The hf engine's int8 rollout (`rollout.precision: int8`, strategies/int8_linears.py) keeps an
# int8 copy of every linear beside the fp32 weights, with per-row scales, biases and the
# per-channel smoothing vectors: 1.009 bytes per parameter on smollm2-135m (the LM head, tied
# to the embedding, has a copy of its own), counted by summing the copies' tensors
INT8_COPY_BYTES = 1.01
# Its bf16 rollout on a CPU (strategies/bf16_linears.py): a bf16 copy of every linear beside
# the fp32 weights (the tied LM head's copy its own), biases included
BF16_COPY_BYTES = 2
# FSDP2's log-probs come from the model's whole-response logits (its root forward runs whole,
# so roll's chunked head is not used): per scored position and vocabulary entry, the head's
# bf16 output and its reshaped bf16 copy, and four fp32 copies that `logprobs_from_logits`
# and `entropy_from_logits` keep for the backward (CUDA allocation history, qwen2.5-0.5b on
# an H200: 2.9 GB at the peak where the plan counted one fp32 copy)
FSDP2_LOGITS_BYTES = 2 + 2 + 4 * 4


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes on one device, by kind. `total` is the sum."""

    weights: int = 0
    grads: int = 0
    optimizer: int = 0
    activations: int = 0
    kv_cache: int = 0
    runtime: int = 0  # a host process's own: interpreter, torch, Ray (`CPU_PROCESS_BYTES`)

    @property
    def total(self) -> int:
        return (
            self.weights
            + self.grads
            + self.optimizer
            + self.activations
            + self.kv_cache
            + self.runtime
        )

    def __add__(self, other: MemoryBreakdown) -> MemoryBreakdown:
        return MemoryBreakdown(
            *(getattr(self, f.name) + getattr(other, f.name) for f in fields(self))
        )

    def as_dict(self) -> dict[str, int]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["total"] = self.total
        return out


def optimizer_bytes_per_param(param_bytes: int) -> int:
    """Adam state per parameter: m and v in fp32 (8), plus an fp32 master copy when the
    weights themselves are 16-bit (the ZeRO paper's K = 12)."""
    return 8 if param_bytes >= 4 else ADAM_MIXED_PRECISION_BYTES


def model_state_bytes(
    num_params: int,
    *,
    dp: int,
    zero_stage: int,
    tp: int = 1,
    pp: int = 1,
    param_bytes: int = 2,
    offload_optimizer: bool = False,
    offload_params: bool = False,
    fp32_grads: bool = False,
) -> MemoryBreakdown:
    """Weights, gradients and Adam states of one training rank (see the module docstring);
    `fp32_grads`: DeepSpeed's bf16 optimizer keeps fp32 gradients beside its states.

    >>> m = model_state_bytes(1000, dp=4, zero_stage=2)
    >>> (m.weights, m.grads, m.optimizer)
    (2000, 500, 3000)
    >>> model_state_bytes(1000, dp=4, zero_stage=2, fp32_grads=True).optimizer
    4000
    """
    if zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {zero_stage}")
    shard = num_params / (tp * pp)  # Ψ'
    k = optimizer_bytes_per_param(param_bytes)
    weights = param_bytes * shard / (dp if zero_stage >= 3 else 1)
    grads = param_bytes * shard / (dp if zero_stage >= 2 else 1)
    if fp32_grads and param_bytes < 4:
        k += DEEPSPEED_FP32_GRAD_BYTES
    optimizer = k * shard / (dp if zero_stage >= 1 else 1)
    if offload_optimizer:
        optimizer = 0
        if zero_stage >= 2:
            grads = 0
    if offload_params:
        weights = 0
    return MemoryBreakdown(weights=round(weights), grads=round(grads), optimizer=round(optimizer))


def weight_bytes(num_params: int, *, tp: int = 1, pp: int = 1, param_bytes: int = 2) -> int:
    """Weights of one inference or reference rank: param_bytes · Ψ / (t·p)."""
    return round(param_bytes * num_params / (tp * pp))


def layer_activation_bytes(
    spec: ModelSpec, *, tokens: int, dtype_bytes: int = 2, counted: bool = False
) -> int:
    """Activations one decoder layer saves for backward, for `tokens` = b·s tokens.

    A stated approximation for llama/qwen layers with memory-efficient (flash) attention,
    which stores no s×s score matrix. Saved tensors per token, in elements:

        attention: norm input h, QKV input h, Q/K/V (q + 2·kv), attention output q
        MLP:       norm input h, gate/up input h, gate and up outputs 2·I, down input I

    so  bytes = dtype · b·s · (4h + 2q + 2kv + 3I),  q = heads·head_dim, kv = kv_heads·head_dim.
    MoE layers route each token to k experts: I becomes k · moe_intermediate_size (plus a
    shared expert's width); where some layers are dense, the wider kind of layer counts.
    This plays the role of Korthikanti et al. 2022's s·b·h·(34 + 5·a·s/h) (GPT layer, 4h
    GELU MLP, scores stored): for a GPT layer it gives 40·s·b·h, with no 5·a·s/h term.

    `counted`: what transformers' llama layer (sdpa attention) was counted to save on the
    CPU (`bench/layer_saved.py`, saved_tensors_hooks): 11,147 elements a
    token for smollm2-135m, 1.32x the stand-in, which leaves out the SiLU's output (I),
    the attention output's contiguous copy read by o_proj (q) and one more h per layer:

        bytes = dtype · b·s · (5h + 3q + 2kv + 4I)

    >>> from rollcli.models.registry import MODELS
    >>> layer_activation_bytes(MODELS["smollm2-135m"], tokens=1, dtype_bytes=1, counted=True)
    11136
    """
    h = spec.hidden_size
    q = spec.num_attention_heads * spec.head_dim
    kv = spec.num_kv_heads * spec.head_dim
    inter = spec.intermediate_size
    if spec.num_experts:  # the k routed experts and a shared one; the wider kind of layer
        routed = spec.num_experts_per_token * spec.moe_intermediate_size
        sparse = routed + spec.shared_expert_intermediate_size
        inter = max(sparse, inter) if spec.num_dense_layers else sparse
    if counted:
        return dtype_bytes * tokens * (5 * h + 3 * q + 2 * kv + 4 * inter)
    return dtype_bytes * tokens * (4 * h + 2 * q + 2 * kv + 3 * inter)


def logits_bytes(spec: ModelSpec, *, tokens: int, tp: int = 1) -> int:
    """Output logits upcast to fp32 for log-probabilities: 4 · b·s · V / t bytes."""
    return math.ceil(4 * tokens * spec.vocab_size / tp)


def activation_bytes(
    spec: ModelSpec,
    *,
    micro_batch: int,
    seq_len: int,
    grad_checkpointing: bool,
    tp: int = 1,
    dtype_bytes: int = 2,
    head: int | None = None,
    counted: bool = False,
) -> int:
    """Peak activations of one training rank for one micro-batch; `head`: the LM head's
    bytes where they are not the whole fp32 logits (`chunked_head_bytes`); `counted`: the
    layer's saved tensors as counted on the CPU (`layer_activation_bytes`).

    Without checkpointing every layer keeps its saved tensors:
        L · layer_activation_bytes + logits
    With full activation checkpointing each layer keeps only its input (dtype · b·s·h)
    and one layer is recomputed at a time:
        L · dtype · b·s·h + layer_activation_bytes + logits
    Tensor parallelism with sequence parallelism divides everything by t (Korthikanti
    et al. 2022). Pipeline parallelism does not: under 1F1B the first stage holds p
    micro-batches of L/p layers, the same as L layers of one micro-batch.
    """
    tokens = micro_batch * seq_len
    per_layer = layer_activation_bytes(
        spec, tokens=tokens, dtype_bytes=dtype_bytes, counted=counted
    )
    if grad_checkpointing:
        body = spec.num_layers * dtype_bytes * tokens * spec.hidden_size + per_layer
    else:
        body = spec.num_layers * per_layer
    if head is None:
        head = logits_bytes(spec, tokens=tokens, tp=tp)
    return math.ceil(body / tp) + head


def chunked_head_bytes(spec: ModelSpec, *, scored_tokens: int, train: bool) -> int:
    """The LM head of this build's fp32 CPU workers (`rollcli.strategies.lm_head`), which
    never builds `[b, s, V]` logits: it scores `scored_tokens` positions (the responses'; a
    whole sequence for sft) a chunk of at most 256 at a time in two kept float32 scratch
    buffers (the logits and what is computed from them). A training call also keeps the
    scored positions' logits for its backward when they take at most 256 MiB, and its
    backward accumulates the head's weight gradient in one `[V, h]` buffer:

        forward   2 · 4 · min(n, 256) · V
        train     2 · 4 · min(n, 256) · V + (4 · n · V if ≤ 256 MiB) + 4 · V · h

    >>> from rollcli.models.registry import MODELS
    >>> chunked_head_bytes(MODELS["smollm2-135m"], scored_tokens=100, train=False)
    39321600
    """
    scratch = 2 * 4 * min(scored_tokens, HEAD_CHUNK_TOKENS) * spec.vocab_size
    if not train:
        return scratch
    kept = 4 * scored_tokens * spec.vocab_size
    kept = kept if kept <= KEEP_LOGITS_BYTES else 0
    return scratch + kept + 4 * spec.vocab_size * spec.hidden_size


def forward_activation_bytes(
    spec: ModelSpec,
    *,
    micro_batch: int,
    seq_len: int,
    tp: int = 1,
    dtype_bytes: int = 2,
    head: int | None = None,
) -> int:
    """Peak activations of a forward-only pass (no grad): one layer's working set + logits
    (or `head`, as in `activation_bytes`)."""
    tokens = micro_batch * seq_len
    per_layer = layer_activation_bytes(spec, tokens=tokens, dtype_bytes=dtype_bytes)
    if head is None:
        head = logits_bytes(spec, tokens=tokens, tp=tp)
    return math.ceil(per_layer / tp) + head


def packed_mask_bytes(elements: int, dtype_bytes: int) -> int:
    """The shared-prefix layout's attention masks of `elements` (Σ L² over the packed
    rows): the bool mask they are built from and the additive one every layer reads
    (`strategies.attention_masks`)."""
    return (1 + dtype_bytes) * elements

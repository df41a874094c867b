"""Memory of one inference rank: the hf engine's (weights, its decode buffer, the prefill's
cache, the sampler's logits) and a paged engine's (weights, the KV cache it reserves)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from rollcli.models.registry import ModelSpec, param_count
from rollcli.planning.memory import (
    MemoryBreakdown,
    weight_bytes,
)

# the hf engine decodes at most this many samples at a time (a prompt's samples together),
# whatever the batch: `rollcli.strategies.hf_infer.HFInferEngine.generate`'s batch_size
HF_DECODE_BATCH = 64


def hf_decode_seqs(share: int, samples_per_prompt: int) -> int:
    """The samples the hf engine holds at once for a rank's `share` of the batch: whole
    prompts of `samples_per_prompt` samples, `HF_DECODE_BATCH` of them at most (one
    prompt's when it has more).

    >>> hf_decode_seqs(512, 8), hf_decode_seqs(40, 5), hf_decode_seqs(512, 5), hf_decode_seqs(200, 100)
    (64, 40, 60, 100)
    """
    n = max(1, samples_per_prompt)
    return min(share, max(HF_DECODE_BATCH // n * n, n))


def hf_engine_memory(
    spec: ModelSpec,
    *,
    max_num_seqs: int,
    seq_len: int,
    prompt_len: int,
    tp: int = 1,
    pp: int = 1,
    dtype_bytes: int = 2,
) -> MemoryBreakdown:
    """One rank of roll's hf engine generating `max_num_seqs` samples at once:

        weights + KV(n · s) + KV(n · prompt) + 3 · n · V · 4

    The decode writes into a buffer of the whole sequence (`hf_kv_buffer`); while the
    buffer is filled, the prefill's own cache of the prompts is still alive; each decode
    step's logits are fp32, and the sampler makes two more of that size (softmax, the
    draw). Measured on an H100 (docs/gpu.md) for qwen2.5-0.5b to 7b at 64 and 256 samples:
    0.92-0.99 of torch's peak.
    """
    per_token = kv_cache_bytes_per_token(spec, tp=tp, pp=pp, dtype_bytes=dtype_bytes)
    return MemoryBreakdown(
        weights=weight_bytes(param_count(spec), tp=tp, pp=pp, param_bytes=dtype_bytes),
        kv_cache=max_num_seqs * (seq_len + prompt_len) * per_token,
        activations=3 * max_num_seqs * math.ceil(spec.vocab_size / tp) * 4,
    )


def kv_cache_bytes_per_token(
    spec: ModelSpec, *, tp: int = 1, pp: int = 1, dtype_bytes: int = 2
) -> int:
    """KV cache of one token on one rank: 2 (K and V) · L/p · ⌈kv_heads/t⌉ · head_dim · dtype.

    When t exceeds the KV heads, engines such as vLLM replicate heads, hence the ceiling.

    >>> from rollcli.models.registry import get_model_spec
    >>> kv_cache_bytes_per_token(get_model_spec("qwen2.5-7b"))  # 2·28·4·128·2
    57344
    """
    layers = math.ceil(spec.num_layers / pp)
    heads = math.ceil(spec.num_kv_heads / tp)
    return 2 * layers * heads * spec.head_dim * dtype_bytes


@dataclass(frozen=True)
class InferenceMemory:
    """One inference rank: weights, the KV cache it reserves and the KV it needs."""

    weights: int
    kv_reserved: int
    kv_needed: int
    kv_per_sequence: int

    @property
    def sequences_in_cache(self) -> int:
        """How many full-length sequences the reserved cache holds at once."""
        return self.kv_reserved // self.kv_per_sequence if self.kv_per_sequence else 0


def inference_memory(
    spec: ModelSpec,
    *,
    capacity_bytes: int,
    gpu_memory_utilization: float,
    max_num_seqs: int,
    max_len: int,
    tp: int = 1,
    pp: int = 1,
    dtype_bytes: int = 2,
    kv_dtype_bytes: int = 2,
) -> InferenceMemory:
    """A vLLM-style engine: it claims `gpu_memory_utilization · capacity` and fills what
    the weights leave with KV cache.

        weights     = dtype · Ψ / (t·p)
        kv_reserved = max(0, utilization · capacity − weights)
        kv_needed   = max_num_seqs · max_len · kv_cache_bytes_per_token

    The engine also subtracts its profiled activation peak from the reservation; we
    ignore it (small next to the cache). A reservation below `kv_needed` still runs, with
    fewer sequences in flight; one below a single sequence fails at start-up.
    """
    weights = weight_bytes(param_count(spec), tp=tp, pp=pp, param_bytes=dtype_bytes)
    per_token = kv_cache_bytes_per_token(spec, tp=tp, pp=pp, dtype_bytes=kv_dtype_bytes)
    reserved = max(0, math.floor(gpu_memory_utilization * capacity_bytes) - weights)
    return InferenceMemory(
        weights=weights,
        kv_reserved=reserved,
        kv_needed=max_num_seqs * max_len * per_token,
        kv_per_sequence=max_len * per_token,
    )

"""What an inference engine that holds its own weights (vllm, sglang) is started with, typed:
the plan's decisions for it (`runtime/role_args.py`) travel to actor_infer in one of these,
and `kwargs()` gives the engine's constructor exactly the options that were set.

A field left None is not passed, so the engine keeps its own default (`vllm_infer.py`,
`sglang_infer.py`); a CPU run's vllm engine, for instance, gets only its dtype and KV cache.

>>> VllmOptions(dtype="float32", kv_cache_gib=1.0).kwargs()
{'dtype': 'float32', 'kv_cache_gib': 1.0}
>>> SglangOptions(dtype="bfloat16", tp=2, sleep_mode=True).kwargs()
{'dtype': 'bfloat16', 'tp': 2, 'sleep_mode': True}
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class _Options:
    def kwargs(self) -> dict[str, Any]:
        """The engine constructor's keyword arguments: the fields that are set."""
        return {
            f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None
        }


@dataclass(frozen=True)
class VllmOptions(_Options):
    """`kv_cache_gib`: the KV-cache reservation per GPU (a GPU plan's, else
    `rollout.vllm_kv_cache_gib`); `tp`: its tensor_parallel_size; `max_num_seqs` and
    `max_model_len`: the sequences the plan sized the cache for; `sleep_mode`: it leaves a
    GPU it shares with training while idle; `enforce_eager`: no torch.compile (tests)."""

    dtype: str | None = None
    kv_cache_gib: float | None = None
    tp: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    sleep_mode: bool | None = None
    enforce_eager: bool | None = None


@dataclass(frozen=True)
class SglangOptions(_Options):
    """`gpu_memory_utilization`: the share of its GPU it takes (SGLang's
    `mem_fraction_static`); `tp` and `sleep_mode` as vllm's."""

    dtype: str | None = None
    tp: int | None = None
    gpu_memory_utilization: float | None = None
    sleep_mode: bool | None = None


EngineOptions = VllmOptions | SglangOptions

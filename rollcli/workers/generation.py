"""Greedy or sampled answers from a worker's own model (held-out checks of the offline
pipelines, which have no inference engine to sync weights to)."""

from __future__ import annotations

from rollcli.strategies.hf_infer import HFInferEngine, SamplingParams


def generate_texts(
    model, tokenizer, prompts: list[list[int]], params: SamplingParams
) -> list[dict]:  # noqa: ANN001
    """`{prompt_index, token_ids, text, finished}` per sample, like actor_infer's `generate`."""
    eos = [tokenizer.eos_token_id]
    gen_eos = getattr(model.generation_config, "eos_token_id", None)
    eos += gen_eos if isinstance(gen_eos, list) else ([gen_eos] if gen_eos is not None else [])
    engine = HFInferEngine(model, sorted(set(eos)), tokenizer.pad_token_id)
    was_training = model.training
    model.eval()
    try:
        gens = engine.generate(prompts, params)
    finally:
        model.train(was_training)
    texts = tokenizer.batch_decode([g.token_ids for g in gens], skip_special_tokens=True)
    return [
        {
            "prompt_index": g.prompt_index,
            "token_ids": g.token_ids,
            "text": t,
            "finished": g.finished,
        }
        for g, t in zip(gens, texts, strict=True)
    ]

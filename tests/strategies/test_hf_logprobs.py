"""The hf engine returns the log-prob of each sampled token under the distribution it was
drawn from: equal to a training forward at the same temperature when nothing is truncated,
and renormalised over the kept tokens under top-k."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_infer import SamplingParams
from rollcli.strategies.hf_model import response_logprobs

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6]]


@pytest.fixture
def engine(hf_engine):
    return hf_engine


def _trainer_logprobs(engine, gens, temperature: float) -> list[list[float]]:
    tensors = rollout_tensors(
        [PROMPTS[g.prompt_index] for g in gens], [g.token_ids for g in gens], 0
    )
    with torch.no_grad():
        lp, _ = response_logprobs(engine.model, tensors, temperature=temperature)
    return [lp[i, : len(g.token_ids)].tolist() for i, g in enumerate(gens)]


def test_sampled_logprobs_equal_a_training_forward(engine) -> None:
    params = SamplingParams(n=3, max_new_tokens=12, temperature=0.7, seed=3)
    gens = engine.generate(PROMPTS, params)
    assert len(gens) == 6
    expected = _trainer_logprobs(engine, gens, 0.7)
    for g, ref in zip(gens, expected, strict=True):
        assert len(g.logprobs) == len(g.token_ids) > 0
        assert g.logprobs == pytest.approx(ref, abs=2e-4)


def test_top_k_logprobs_are_renormalised_over_the_kept_tokens(engine) -> None:
    params = SamplingParams(n=2, max_new_tokens=10, temperature=1.0, top_k=3, seed=5)
    gens = engine.generate(PROMPTS, params)
    full = _trainer_logprobs(engine, gens, 1.0)
    tensors = rollout_tensors(
        [PROMPTS[g.prompt_index] for g in gens], [g.token_ids for g in gens], 0
    )
    with torch.no_grad():
        out = engine.model(
            input_ids=tensors["input_ids"],
            attention_mask=tensors["attention_mask"],
            position_ids=tensors["position_ids"],
        ).logits
    width = int(tensors["prompt_width"][0])
    for i, g in enumerate(gens):
        logits = out[i, width - 1 : width - 1 + len(g.token_ids)]
        top3 = logits.topk(3, dim=-1)
        for t, tok in enumerate(g.token_ids):
            assert tok in top3.indices[t].tolist()  # only the 3 best tokens can be drawn
            # log p_top3(tok) = logit - logsumexp(top-3 logits)
            expected = float(logits[t, tok] - torch.logsumexp(top3.values[t], dim=0))
            assert g.logprobs[t] == pytest.approx(expected, abs=2e-4)
            assert g.logprobs[t] >= full[i][t] - 1e-6


def test_greedy_output_has_logprobs_of_the_argmax(engine) -> None:
    gens = engine.generate(PROMPTS, SamplingParams(n=1, max_new_tokens=8, temperature=0.0))
    expected = _trainer_logprobs(engine, gens, 1.0)
    for g, ref in zip(gens, expected, strict=True):
        assert g.logprobs == pytest.approx(ref, abs=2e-4)


def test_a_loaded_cpu_model_trains_with_the_engines_attention_from_the_start(tiny_model) -> None:
    """The engine switches a CPU model to grouped-query attention without copies; a model
    loaded for training must already use it, or a trainer sharing its model with the engine
    computes different gradients before its first rollout (a resumed run) than after."""
    from rollcli.strategies.hf_gqa_attention import NAME
    from rollcli.strategies.hf_model import load_causal_lm

    model = load_causal_lm(tiny_model, train=True)
    assert model.config._attn_implementation == NAME

"""The hf engine returns the log-prob of each sampled token under the temperature-only
distribution: equal to a training forward at the same temperature, with or without top-k /
top-p (which only decide which tokens can be drawn), so truncated IS weights are 1 when the
weights are the same."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.sampling import SamplingParams

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


def test_top_k_draws_among_the_kept_tokens_and_reports_the_full_logprob(engine) -> None:
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
            # log p(tok) = logit - logsumexp(all logits), not over the top 3 only
            expected = float(logits[t, tok] - torch.logsumexp(logits[t], dim=0))
            assert g.logprobs[t] == pytest.approx(expected, abs=2e-4)
        assert g.logprobs == pytest.approx(full[i], abs=2e-4)


def test_top_p_logprobs_equal_the_trainers_so_tis_weights_are_one(engine) -> None:
    """Same weights, top_p 0.9 and temperature 0.7: the engine's `mu` is the trainer's
    `pi_old` (the renormalised log-prob gave mean weights of 0.906)."""
    from rollcli.algorithms.off_policy import truncated_is_weights

    params = SamplingParams(n=4, max_new_tokens=12, temperature=0.7, top_p=0.9, seed=11)
    gens = engine.generate(PROMPTS, params)
    trainer = _trainer_logprobs(engine, gens, 0.7)
    for g, ref in zip(gens, trainer, strict=True):
        assert g.logprobs == pytest.approx(ref, abs=2e-4)
    width = max(len(g.token_ids) for g in gens)
    pad = [[0.0] * (width - len(g.token_ids)) for g in gens]
    mu = torch.tensor([g.logprobs + p for g, p in zip(gens, pad, strict=True)])
    old = torch.tensor([ref + p for ref, p in zip(trainer, pad, strict=True)])
    mask = torch.tensor(
        [[1.0] * len(g.token_ids) + [0.0] * len(p) for g, p in zip(gens, pad, strict=True)]
    )
    weights = truncated_is_weights(old, mu, mask, cap=2.0)
    assert float((weights * mask).sum() / mask.sum()) == pytest.approx(1.0, abs=1e-3)


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

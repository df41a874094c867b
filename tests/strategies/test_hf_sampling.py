"""The hf engine's sampler (`hf_sampling.sample_tokens`): one uniform per row through the CDF draws from the
same categorical distribution as `torch.multinomial`; masked entries are never drawn; the
log-prob returned is log-softmax's."""

from __future__ import annotations

import torch

from rollcli.strategies.hf_sampling import sample_tokens as _sample


def test_frequencies_match_the_softmax() -> None:
    scores = torch.tensor([2.0, 0.5, -1.0, 1.0, -float("inf"), 3.0])
    rows = 40_000
    gen = torch.Generator().manual_seed(0)
    tokens, logprobs = _sample(scores.expand(rows, -1), [], gen)
    probs = torch.softmax(scores, dim=0)
    freq = torch.bincount(tokens, minlength=6).double() / rows
    sigma = (probs * (1 - probs) / rows).sqrt()
    assert freq[4] == 0  # masked (-inf): never drawn
    assert ((freq - probs).abs() <= 5 * sigma + 1e-12).all(), (freq, probs)
    assert torch.allclose(logprobs, torch.log_softmax(scores, 0)[tokens], atol=1e-6)


def test_a_near_certain_row_and_greedy() -> None:
    scores = torch.full((3, 49152), -30.0)
    scores[:, 123] = 30.0  # p(others) ~ 1e-21 each
    tokens, _ = _sample(scores, [], torch.Generator().manual_seed(1))
    assert tokens.tolist() == [123] * 3
    scores = torch.randn(4, 1000, generator=torch.Generator().manual_seed(2))
    tokens, logprobs = _sample(scores, [], None)
    assert torch.equal(tokens, scores.argmax(-1))
    expected = torch.log_softmax(scores, -1).gather(1, tokens[:, None]).squeeze(1)
    assert torch.allclose(logprobs, expected, atol=1e-6)


def test_seeded_draws_repeat() -> None:
    scores = torch.randn(8, 500, generator=torch.Generator().manual_seed(3))
    a, _ = _sample(scores, [], torch.Generator().manual_seed(7))
    b, _ = _sample(scores, [], torch.Generator().manual_seed(7))
    assert torch.equal(a, b)

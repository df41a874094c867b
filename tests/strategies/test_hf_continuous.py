"""The hf engine's continuous batching (strategies/hf_continuous.py) on tiny-random with
1,000 token ids counted as EOS, so samples end at different decode steps: rows refilled as
samples end sample what chunked decoding samples, and a paused sample continues from its
tokens with log-probs a plain forward confirms."""

from __future__ import annotations

import pytest
import torch

from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.sampling import PoolSample, SamplingParams

EOS = list(range(1000, 2000))


@pytest.fixture(scope="module")
def engine(tiny_model) -> HFInferEngine:
    tok = load_tokenizer(str(tiny_model))
    model = load_causal_lm(str(tiny_model), train=False)
    return HFInferEngine(model, EOS, tok.pad_token_id)


def _prompts() -> list[list[int]]:
    return [list(range(100 + 7 * i, 110 + 9 * i)) for i in range(6)]  # 10 to 55 tokens


def _forced(model: torch.nn.Module, prompt: list[int], response: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logp.gather(1, torch.tensor(response)[:, None]).squeeze(1)


def test_refilled_rows_sample_what_chunks_sample(engine) -> None:
    """Greedy, so both orders draw alike; a third of the vocabulary ends a greedy reply."""
    engine = HFInferEngine(engine.model, list(range(0, 49152, 3)), engine.pad_token_id)
    greedy = SamplingParams(n=2, max_new_tokens=40, temperature=0.0)
    chunked = engine.generate(_prompts(), greedy, batch_size=4)
    chunked_busy = engine.occupancy
    refilled = engine.generate(_prompts(), greedy, batch_size=4, continuous=True)
    busy = engine.occupancy
    lengths = {len(g.token_ids) for g in chunked}
    assert len(lengths) >= 3  # the samples end at different steps
    for a, b in zip(chunked, refilled, strict=True):
        assert (a.prompt_index, a.sample, a.token_ids, a.finished) == (
            b.prompt_index,
            b.sample,
            b.token_ids,
            b.finished,
        )
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    # the same tokens in fewer decode steps: rows stay busy
    assert busy[0] == chunked_busy[0] == sum(len(g.token_ids) for g in chunked)
    assert busy[0] / busy[1] > chunked_busy[0] / chunked_busy[1]


def test_a_paused_sample_continues_from_its_tokens(engine) -> None:
    prompts = _prompts()
    params = SamplingParams(max_new_tokens=40, temperature=1.0, seed=5)
    work = [PoolSample(i, s) for i in range(len(prompts)) for s in range(2)]
    first = engine.generate_pool(prompts, work, params, until_groups=1, batch_size=4)
    again = engine.generate_pool(prompts, work, params, until_groups=1, batch_size=4)
    assert [g.token_ids for g in first] == [g.token_ids for g in again]  # one seed, one call
    ended = [g for g in first if not g.paused]
    paused = [g for g in first if g.paused and g.token_ids]
    assert ended and paused
    assert all(g.finished or len(g.token_ids) == 40 for g in ended)
    more = [
        PoolSample(g.prompt_index, g.sample, tuple(g.token_ids), tuple(g.logprobs))
        for g in first
        if g.paused
    ]
    second = engine.generate_pool(prompts, more, params, batch_size=4)
    assert not any(g.paused for g in second)
    for before, after in zip([g for g in first if g.paused], second, strict=True):
        assert after.token_ids[: len(before.token_ids)] == before.token_ids
        assert after.logprobs[: len(before.logprobs)] == before.logprobs
        forced = _forced(engine.model, prompts[after.prompt_index], after.token_ids)
        assert torch.allclose(torch.tensor(after.logprobs), forced, atol=1e-4)


def test_a_continued_moe_sample_keeps_its_decode_time_routing(tiny_moe_model) -> None:
    tok = load_tokenizer(str(tiny_moe_model))
    model = load_causal_lm(str(tiny_moe_model), train=False)
    engine = HFInferEngine(model, EOS, tok.pad_token_id)
    prompts = _prompts()[:3]
    params = SamplingParams(max_new_tokens=30, temperature=1.0, seed=2)
    work = [PoolSample(i, s) for i in range(3) for s in range(2)]
    first = engine.generate_pool(prompts, work, params, until_groups=1, batch_size=3)
    paused = [g for g in first if g.paused and g.token_ids]
    assert paused
    more = [
        PoolSample(
            g.prompt_index, g.sample, tuple(g.token_ids), tuple(g.logprobs), g.routed_experts
        )
        for g in paused
    ]
    for before, after in zip(paused, engine.generate_pool(prompts, more, params), strict=True):
        fed = len(prompts[before.prompt_index]) + len(before.token_ids) - 1
        record = after.routed_experts
        assert record.shape[0] == len(prompts[after.prompt_index]) + len(after.token_ids)
        assert torch.equal(record[:fed], before.routed_experts[:fed])  # decode-time, kept
        assert (record[:-1] >= 0).all() and (record[-1] < 0).all()  # the last never fed

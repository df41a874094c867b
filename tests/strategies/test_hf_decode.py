"""The hf engine's decode loop: a sample leaves the batch (and its KV cache rows go) the step
it ends, which must not change any other sample; `on_sample` hears of each sample once, as it
ends; `progress.stop` ends a call at the next token."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rollcli.strategies.sampling import SamplingParams

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6], [3, 8, 200, 11], [9]]
# every 7th token id ends a sample: tiny-random's samples end after a few to tens of tokens
STOPS = tuple(range(0, 49152, 7))


@pytest.fixture
def engine(hf_engine):
    return hf_engine


def test_samples_that_end_early_leave_the_others_unchanged(engine) -> None:
    params = SamplingParams(n=1, max_new_tokens=30, temperature=0.0, stop_token_ids=STOPS)
    together = engine.generate(PROMPTS, params)
    lengths = {len(g.token_ids) for g in together}
    assert len(lengths) > 1  # samples ended at different steps: the batch shrank
    for i, prompt in enumerate(PROMPTS):
        alone = engine.generate([prompt], params)[0]
        assert together[i].token_ids == alone.token_ids
        assert together[i].logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert together[i].finished == (together[i].token_ids[-1] in STOPS)


def test_on_sample_hears_each_sample_once_as_it_ends(engine) -> None:
    params = SamplingParams(n=3, max_new_tokens=30, temperature=1.0, seed=4, stop_token_ids=STOPS)
    heard = []
    gens = engine.generate(PROMPTS, params, on_sample=lambda g: heard.append(g))
    assert sorted((g.prompt_index, g.sample) for g in heard) == [
        (i, k) for i in range(len(PROMPTS)) for k in range(3)
    ]
    assert [(g.prompt_index, g.sample) for g in gens] == [
        (i, k) for i in range(len(PROMPTS)) for k in range(3)
    ]
    # one batch: a sample is heard of the step it ends, so shorter ones come first
    lengths = [len(g.token_ids) for g in heard]
    assert lengths == sorted(lengths)
    assert len(set(lengths)) > 1


@pytest.mark.parametrize("temperature", [1.0, 5.0])
def test_sampling_repeats_for_a_seed(engine, temperature: float) -> None:
    # temperature 1 needs no warper at all, and must still sample (not fall back to greedy)
    params = SamplingParams(
        n=4, max_new_tokens=12, temperature=temperature, seed=9, stop_token_ids=STOPS
    )
    first = [g.token_ids for g in engine.generate(PROMPTS, params)]
    assert first == [g.token_ids for g in engine.generate(PROMPTS, params)]
    for i in range(len(PROMPTS)):  # each prompt's samples differ
        assert len({tuple(t) for t in first[4 * i : 4 * i + 4]}) > 1
    other = replace(params, seed=10)
    assert first != [g.token_ids for g in engine.generate(PROMPTS, other)]


def test_stop_ends_the_call_at_the_next_token(engine, stopped_once_under_way) -> None:
    params = SamplingParams(n=2, max_new_tokens=400, temperature=1.0, seed=1)
    heard = []
    with stopped_once_under_way(engine):
        gens = engine.generate(PROMPTS, params, on_sample=heard.append)
    assert len(gens) == 8 and len(heard) == 8
    assert all(len(g.token_ids) < 400 and not g.finished for g in gens)
    assert engine.progress.read() == (0, 0)


def test_greedy_tokens_equal_transformers_generate(engine, tiny_model) -> None:
    """Left padding, prompts of different lengths, stop tokens that end samples at different
    steps (the batch shrinks, the in-place KV buffers drop rows): every sample's tokens are
    `generate`'s (a fresh model with transformers' own attention and cache) up to its stop."""
    from transformers import AutoModelForCausalLM

    from rollcli.data.padding import pad_left

    params = SamplingParams(n=2, max_new_tokens=24, temperature=0.0, stop_token_ids=STOPS)
    gens = engine.generate(PROMPTS, params)
    assert len({len(g.token_ids) for g in gens}) > 1  # samples ended at different steps
    reference = AutoModelForCausalLM.from_pretrained(str(tiny_model)).eval()
    assert reference.config._attn_implementation == "sdpa"
    ids, mask = pad_left(PROMPTS, engine.pad_token_id)
    out = reference.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=24,
        do_sample=False,
        pad_token_id=engine.pad_token_id,
        eos_token_id=sorted(engine.eos | set(STOPS)),
    )
    for g in gens:
        expected = out[g.prompt_index, ids.shape[1] :].tolist()
        assert g.token_ids == expected[: len(g.token_ids)]
        assert g.finished == (len(g.token_ids) < 24 or g.token_ids[-1] in STOPS)


def test_a_kv_buffer_keeps_the_selected_rows_in_place() -> None:
    """Dropping rows moves the kept ones up in the same buffer; positions appended after it
    land in the kept rows; rows out of order are refused."""
    import torch

    from rollcli.strategies.hf_kv_buffer import BufferLayer

    keys, values = torch.randn(5, 2, 3, 4), torch.randn(5, 2, 3, 4)
    layer = BufferLayer(keys, values, capacity=8)
    buffer = layer._k
    layer.batch_select_indices(torch.tensor([0, 2, 4]))
    assert layer._k.data_ptr() == buffer.data_ptr()  # no new buffer
    torch.testing.assert_close(layer.keys, keys[[0, 2, 4]], rtol=0, atol=0)
    torch.testing.assert_close(layer.values, values[[0, 2, 4]], rtol=0, atol=0)
    new_k, new_v = torch.randn(3, 2, 1, 4), torch.randn(3, 2, 1, 4)
    k, v = layer.update(new_k, new_v)
    torch.testing.assert_close(k, torch.cat([keys[[0, 2, 4]], new_k], dim=2), rtol=0, atol=0)
    torch.testing.assert_close(v, torch.cat([values[[0, 2, 4]], new_v], dim=2), rtol=0, atol=0)
    with pytest.raises(ValueError, match="ascending"):
        layer.batch_select_indices(torch.tensor([1, 0]))

"""The hf engine's static decode (hf_static_decode.py), forced on for a CPU model: the same
tokens and log-probs as the dynamic decode (rows leaving the batch) for prompts of different
lengths, samples that end at different steps, several chunks and group sampling; models it
does not fit are refused by name. CUDA graphs are the GPU kit's (bench/gpu_proof_cases.py)."""

from __future__ import annotations

import pytest
import torch

from rollcli.strategies.hf_infer import HFInferEngine, SamplingParams

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6], [3, 8, 200, 11], [9], [4, 4, 4, 4, 4, 4, 4, 2]]
# every 7th token id ends a sample: tiny-random's samples end after a few to tens of tokens
STOPS = tuple(range(0, 49152, 7))
# the static decode attends over the whole buffer (masked positions add exact zeros), so a
# row's sums run in another order: log-probs agree to float32 rounding, not bit for bit
LOGPROB_TOL = 1e-4


@pytest.fixture(scope="module")
def static_engine(hf_engine) -> HFInferEngine:
    engine = HFInferEngine(
        hf_engine.model, sorted(hf_engine.eos), hf_engine.pad_token_id, static_decode=True
    )
    assert engine.static and not engine.cuda_graphs  # a CPU model: eager steps
    return engine


def _same(static: list, dynamic: list) -> None:
    assert [(g.prompt_index, g.sample) for g in static] == [
        (g.prompt_index, g.sample) for g in dynamic
    ]
    for s, d in zip(static, dynamic, strict=True):
        assert s.token_ids == d.token_ids
        assert s.finished == d.finished
        assert s.logprobs == pytest.approx(d.logprobs, abs=LOGPROB_TOL)


def test_greedy_tokens_and_logprobs_equal_the_dynamic_decode(hf_engine, static_engine) -> None:
    """Left padding, stop tokens ending samples at different steps, chunks of 2 prompts."""
    params = SamplingParams(max_new_tokens=16, temperature=0.0, stop_token_ids=STOPS)
    dynamic = hf_engine.generate(PROMPTS, params, batch_size=2)
    static = static_engine.generate(PROMPTS, params, batch_size=2)
    lengths = [len(g.token_ids) for g in dynamic]
    assert len(set(lengths)) > 1 and max(lengths) > 2  # samples ended at different steps
    assert any(g.finished for g in dynamic) and not all(g.finished for g in dynamic)
    _same(static, dynamic)
    # one chunk of all prompts: the same samples again
    _same(static_engine.generate(PROMPTS, params), dynamic)


def test_eos_ends_a_sample_as_a_stop_token_does(hf_engine, static_engine) -> None:
    """The engine's EOS ids (here: the stop block itself) end samples without stop tokens."""
    eos = sorted(STOPS)
    dynamic = HFInferEngine(hf_engine.model, eos, hf_engine.pad_token_id, static_decode=False)
    static = HFInferEngine(hf_engine.model, eos, hf_engine.pad_token_id, static_decode=True)
    params = SamplingParams(max_new_tokens=16, temperature=0.0)
    want = dynamic.generate(PROMPTS, params)
    assert any(g.finished and len(g.token_ids) < 16 for g in want)
    _same(static.generate(PROMPTS, params), want)


def test_group_sampling_draws_the_same_tokens(hf_engine, static_engine) -> None:
    """n samples per prompt, top-k and top-p: the static decode samples only the live rows'
    logits with the chunk's generator, so its draws are the dynamic decode's."""
    params = SamplingParams(
        n=3, max_new_tokens=12, temperature=0.8, top_k=50, top_p=0.9, seed=5, stop_token_ids=STOPS
    )
    dynamic = hf_engine.generate(PROMPTS, params, batch_size=6)
    assert len({len(g.token_ids) for g in dynamic}) > 1
    _same(static_engine.generate(PROMPTS, params, batch_size=6), dynamic)


def test_decode_batch_is_the_default_chunk(hf_engine) -> None:
    """`decode_batch` (the plan's max_num_seqs on GPUs) sets the samples per chunk, and so
    each chunk's generator (seeded by its first prompt)."""
    params = SamplingParams(n=2, max_new_tokens=8, temperature=1.0, seed=3)
    engine = HFInferEngine(hf_engine.model, sorted(hf_engine.eos), 0, decode_batch=4)
    chunked = [g.token_ids for g in engine.generate(PROMPTS, params)]
    assert chunked == [g.token_ids for g in hf_engine.generate(PROMPTS, params, batch_size=4)]
    assert chunked != [g.token_ids for g in hf_engine.generate(PROMPTS, params)]


def test_stop_ends_a_static_decode_at_the_next_token(static_engine, stopped_once_under_way) -> None:
    params = SamplingParams(n=2, max_new_tokens=400, temperature=1.0, seed=1)
    with stopped_once_under_way(static_engine):
        gens = static_engine.generate(PROMPTS, params)
    assert len(gens) == 10
    assert all(len(g.token_ids) < 400 and not g.finished for g in gens)


def test_models_it_does_not_fit_are_refused(hf_engine) -> None:
    """A sliding-window model keeps the dynamic decode (auto) or is refused (forced); a CPU
    model decodes dynamically unless forced."""
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        sliding_window=8,
    )
    model = MistralForCausalLM(config).eval()
    with pytest.raises(ValueError, match="StaticSlidingWindowLayer"):
        HFInferEngine(model, [1], 0, static_decode=True)
    auto = HFInferEngine(model, [1], 0)
    assert not auto.static and auto.static_refusal == "not on a CUDA device"
    assert not HFInferEngine(hf_engine.model, [1], 0).static  # tiny-random on the CPU
    model.config._attn_implementation = "flash_attention_2"  # reads no 4-D mask
    with pytest.raises(ValueError, match="reads no 4-D mask"):
        HFInferEngine(model, [1], 0, static_decode=True)
    assert torch.is_grad_enabled()  # the engine's no_grad stays inside its calls


def test_folded_decode_attention_equals_sdpa() -> None:
    """A decode step's grouped heads folded onto their key/value head (the GPU decode's
    attention) computes transformers' `sdpa` with a 4-D mask; longer queries are sdpa's."""
    from types import SimpleNamespace

    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from rollcli.strategies.hf_gqa_attention import folded_decode_attention

    g = torch.Generator().manual_seed(0)
    module = SimpleNamespace(num_key_value_groups=3, is_causal=True)
    key, value = torch.randn(4, 2, 10, 8, generator=g), torch.randn(4, 2, 10, 8, generator=g)
    mask = torch.zeros(4, 1, 1, 10).masked_fill_(torch.rand(4, 1, 1, 10, generator=g) < 0.3, -1e9)
    mask[..., -1] = 0  # every row sees its new position
    for q_len, m in ((1, mask), (3, mask.expand(4, 1, 3, 10))):
        query = torch.randn(4, 6, q_len, 8, generator=g)
        want, _ = sdpa_attention_forward(module, query, key, value, m, scaling=0.3)
        got, _ = folded_decode_attention(module, query, key, value, m, scaling=0.3)
        assert got.shape == want.shape == (4, q_len, 6, 8)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_the_static_decode_with_folded_attention_samples_the_same(hf_engine, tiny_model) -> None:
    """The GPU decode's pairing (static cache + `sdpa_folded`) on a CPU copy of the model."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    from rollcli.strategies.hf_gqa_attention import FOLDED, folded_decode_attention
    from rollcli.strategies.hf_model import load_causal_lm

    model = load_causal_lm(str(tiny_model), train=False)
    AttentionInterface.register(FOLDED, folded_decode_attention)
    AttentionMaskInterface.register(FOLDED, sdpa_mask)
    model.set_attn_implementation(FOLDED)
    engine = HFInferEngine(model, sorted(hf_engine.eos), hf_engine.pad_token_id, static_decode=True)
    params = SamplingParams(n=2, max_new_tokens=12, temperature=0.0, stop_token_ids=STOPS)
    _same(engine.generate(PROMPTS, params), hf_engine.generate(PROMPTS, params))

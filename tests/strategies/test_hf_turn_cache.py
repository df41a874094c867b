"""Multi-turn sessions of the hf engine: a turn that reuses its episode's KV gives the same
tokens and log-probs as prefilling the whole conversation, in a batch of episodes of
different lengths and when a prompt does not extend its session; sessions are freed when
episodes end, bounded in memory, and never outlive a weight update."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from weight_sync_pair import sync_into_worker

from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import load_causal_lm, load_tokenizer
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

# every 7th token id ends a reply: tiny-random's replies end after a few to tens of tokens
STOPS = tuple(range(0, 49152, 7))
GREEDY = SamplingParams(n=1, max_new_tokens=12, temperature=0.0, stop_token_ids=STOPS)
FIRST = [[1, 17, 42, 99, 7, 300, 301], [1, 5, 6], [3, 8, 200, 11, 12]]
# the environment's turns: different lengths per episode and turn
ENV_TURNS = [[[50, 51, 52], [60, 61]], [[70], [80, 81, 82, 83, 84]], [[90, 91], [92]]]


@pytest.fixture(scope="module")
def engines(tiny_model) -> tuple[HFInferEngine, HFInferEngine]:
    """Two engines on one model: with sessions and without."""
    torch.manual_seed(0)
    model = load_causal_lm(str(tiny_model), train=False)
    tok = load_tokenizer(str(tiny_model))
    cached = HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id, session_mib=64)
    plain = HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id)
    return cached, plain


def play(
    engine: HFInferEngine, sessions: list[str] | None, edit_turn: int = -1, evict_turn: int = -1
) -> tuple:
    """Three turns of the three episodes in one batch each; each prompt is the last prompt
    + the reply + the env's turn. At `edit_turn` episode 0's prompt changes an early token
    (it no longer extends its session); at `evict_turn` episode 1's session is gone (as the
    turn cache's budget drops one). Returns every turn's generations and prompts."""
    prompts = [list(p) for p in FIRST]
    turns, asked = [], []
    for turn in range(3):
        if turn == edit_turn:
            prompts[0][2] = 43
        if turn == evict_turn and sessions:
            engine.end_sessions([sessions[1]])
        kwargs = {"sessions": sessions} if sessions else {}
        gens = engine.generate(prompts, GREEDY, **kwargs)
        turns.append(gens)
        asked.append(prompts)
        if turn < 2:
            prompts = [
                p + g.token_ids + env[turn]
                for p, g, env in zip(prompts, gens, ENV_TURNS, strict=True)
            ]
    return turns, asked


def assert_same(cached_turns: list, plain_turns: list) -> None:
    for cached, plain in zip(cached_turns, plain_turns, strict=True):
        for c, p in zip(cached, plain, strict=True):
            assert c.token_ids == p.token_ids
            assert c.logprobs == pytest.approx(p.logprobs, abs=1e-5)
            assert c.finished == p.finished


def test_reused_turns_equal_full_prefills(engines) -> None:
    cached, plain = engines
    ids = ["a", "b", "c"]
    (with_sessions, prompts), (without, _) = play(cached, ids), play(plain, None)
    assert_same(with_sessions, without)
    lengths = {len(g.token_ids) for turn in without for g in turn}
    assert len(lengths) > 1  # replies of different lengths: rows padded differently
    assert [g.cached_tokens for g in with_sessions[0]] == [0, 0, 0]
    for turn in (1, 2):  # all but the last prompt's reply's last token and the env's turn
        held = [
            len(p) + len(g.token_ids) - 1
            for p, g in zip(prompts[turn - 1], with_sessions[turn - 1], strict=True)
        ]
        assert [g.cached_tokens for g in with_sessions[turn]] == held
    cached.end_sessions(ids)


def test_a_prompt_that_does_not_extend_its_session_falls_back(engines) -> None:
    cached, plain = engines
    ids = ["d", "e", "f"]
    (with_sessions, _), (without, _) = play(cached, ids, 2), play(plain, None, 2)
    assert_same(with_sessions, without)
    # episode 0 reuses only the two tokens before the edit; the others their whole past
    assert with_sessions[2][0].cached_tokens == 2
    assert all(g.cached_tokens > 2 for g in with_sessions[2][1:])
    cached.end_sessions(ids)


def test_a_batch_of_kept_and_evicted_sessions_is_merged_right(engines) -> None:
    """Episode 1's session was evicted: the batch is prefilled in two parts, merged into a
    cache as wide as the longest prompt (not the longest reuse plus the longest new part),
    and every token and log-prob equals full prefills'."""
    cached, plain = engines
    ids = ["m", "n", "o"]
    (with_sessions, _), (without, _) = play(cached, ids, evict_turn=2), play(plain, None)
    assert_same(with_sessions, without)
    assert with_sessions[2][1].cached_tokens == 0
    assert with_sessions[2][0].cached_tokens > 0 and with_sessions[2][2].cached_tokens > 0
    cached.end_sessions(ids)


@contextmanager
def forward_shapes(model: torch.nn.Module) -> Iterator[list[tuple[int, int]]]:
    """The `input_ids` shape of every call of `model`'s forward inside the block (a decode
    step calls the model's body, not this forward)."""
    shapes: list[tuple[int, int]] = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    try:
        yield shapes
    finally:
        hook.remove()


def test_a_shared_head_and_identical_prompts_are_prefilled_once(engines) -> None:
    """Four episodes of two tasks open with two distinct prompts that share a 70-token head
    (a tool env's system prompt): the head is one forward of one row, the tails one of two
    rows, yet every episode's reply, log-probs and later turns (each its own session) equal
    those of episodes prefilled one by one."""
    from rollcli.strategies.hf_prefill import SHARED_PREFIX_MIN

    cached, plain = engines
    head = [(7 * i) % 500 + 1 for i in range(SHARED_PREFIX_MIN + 6)]
    first = [head + FIRST[0], head + FIRST[2][:2], head + FIRST[0], head + FIRST[0]]
    with forward_shapes(cached.model) as shapes:
        replies = cached.generate(first, GREEDY, sessions=["g0", "g1", "g2", "g3"])
    # the head, then the two distinct tails
    assert shapes[:2] == [(1, len(head)), (2, len(FIRST[0]))]
    alone = [plain.generate([p], GREEDY)[0] for p in first]
    assert_same([replies], [alone])
    env = [[50, 51], [60], [70, 71, 72], [80]]  # the episodes part ways
    second = [p + g.token_ids + e for p, g, e in zip(first, replies, env, strict=True)]
    turn2 = cached.generate(second, GREEDY, sessions=["g0", "g1", "g2", "g3"])
    assert [g.cached_tokens for g in turn2] == [
        len(p) + len(g.token_ids) - 1 for p, g in zip(first, replies, strict=True)
    ]
    assert_same([turn2], [[plain.generate([p], GREEDY)[0] for p in second]])
    cached.end_sessions(["g0", "g1", "g2", "g3"])


def test_a_short_shared_head_keeps_one_plain_forward(engines) -> None:
    """Below `SHARED_PREFIX_MIN` shared tokens (a chat template's system line) the prompts
    are one forward, as single-turn sampling always was."""
    _, plain = engines
    with forward_shapes(plain.model) as shapes:
        plain.generate([[9] * 40 + FIRST[0], [9] * 40 + FIRST[1]], GREEDY)
    assert shapes[0] == (2, 40 + len(FIRST[0]))


def test_a_short_head_many_prompts_share_is_prefilled_once(engines) -> None:
    """A validation chunk: 40 distinct prompts opening with the same 20 tokens (a chat
    template's system line and the task's sentence) save 780 prompt tokens, so the head is
    one forward of one row; every greedy reply and its log-probs equal the prompt's alone."""
    from rollcli.strategies.hf_prefill import worth_sharing

    _, plain = engines
    head = [(11 * i) % 400 + 2 for i in range(20)]
    prompts = [head + [500 + i, 600 + (i * 3) % 17, 700 + i % 5][: 1 + i % 3] for i in range(40)]
    assert worth_sharing(20, 40) and not worth_sharing(20, 2) and not worth_sharing(15, 100)
    with forward_shapes(plain.model) as shapes:
        together = plain.generate(prompts, GREEDY)
    assert shapes[:2] == [(1, 20), (40, 3)]  # the head, then the tails (right-aligned)
    assert_same([together], [[plain.generate([p], GREEDY)[0] for p in prompts]])


def test_a_session_batch_is_one_buffer_as_wide_as_its_longest_prompt(engines) -> None:
    """Rows that reuse KV and a row that does not: one buffer of the longest prompt plus the
    room, rows right-aligned (reusing first), every forward written into it in place, and
    the last logits those of full prefills."""
    from rollcli.strategies.hf_prefill import prefill, prefill_sessions

    cached, _ = engines
    model = cached.model
    cached.generate([[1, 17, 42, 99, 7, 300, 301]], GREEDY, sessions=["w"])
    long = cached.sessions.sessions["w"].ids + [50, 51]
    short = [3, 8, 200, 11, 12, 13, 14, 15]
    reuse = [(None, 0), cached.sessions.reusable("w", long)]
    done = prefill_sessions(model, [short, long], reuse, cached.pad_token_id, room=4)
    assert done.order == [1, 0]
    width = max(len(long), len(short))
    assert done.mask.shape[1] == width
    assert done.mask.sum(1).tolist() == [len(long), len(short)]
    assert done.next_position.tolist() == [len(long), len(short)]
    layer = done.cache.layers[0]
    assert layer._k.shape[:3] == (2, layer._k.shape[1], width + 4) and layer.length == width
    reference = prefill(model, [long, short], cached.pad_token_id)
    torch.testing.assert_close(done.logits, reference.logits, atol=1e-5, rtol=1e-5)
    for mine, ref in zip(done.cache.layers, reference.cache.layers, strict=True):
        for row, n in ((0, len(long)), (1, len(short))):
            torch.testing.assert_close(
                mine.keys[row][:, width - n :], ref.keys[row][:, -n:], atol=1e-5, rtol=1e-5
            )
    cached.end_sessions(["w"])


def test_sessions_are_freed_and_bounded(engines, tiny_model) -> None:
    cached, _ = engines
    play(cached, ["g", "h", "i"])
    store = cached.sessions
    assert set(store.sessions) >= {"g", "h", "i"}
    per_token = store.sessions["g"].nbytes / len(store.sessions["g"].ids)
    cached.end_sessions(["g", "h", "i"])
    assert not {"g", "h", "i"} & set(store.sessions) and store.nbytes == 0
    # a budget of ~1.5 sessions keeps only the most recently stored one
    model, tok = cached.model, load_tokenizer(str(tiny_model))
    small = HFInferEngine(model, [tok.eos_token_id], tok.pad_token_id, session_mib=1e-9)
    small.sessions.max_bytes = int(per_token * 40)
    small.generate([[1] * 20], GREEDY, sessions=["x"])
    small.generate([[2] * 20], GREEDY, sessions=["y"])
    assert list(small.sessions.sessions) == ["y"]
    assert small.sessions.nbytes == small.sessions.sessions["y"].nbytes <= per_token * 40


def test_sessions_need_one_sample_per_prompt(engines) -> None:
    cached, plain = engines
    with pytest.raises(ValueError, match="one sample per prompt"):
        cached.generate([[1, 2]], SamplingParams(n=2), sessions=["a"])
    with pytest.raises(ValueError, match="session_mib"):
        plain.generate([[1, 2]], GREEDY, sessions=["a"])


def test_a_weight_update_drops_every_session(tiny_model) -> None:
    """After a real weight sync the next turn prefills its whole prompt with the new
    weights: its tokens and log-probs equal a fresh engine's on those weights."""
    infer = ActorInferWorker(ActorInferArgs(str(tiny_model), num_threads=1, session_mib=64))
    prompt = FIRST[0]
    first = infer.generate([prompt], GREEDY, sessions=["ep"])[0]
    assert "ep" in infer.engine.sessions.sessions
    trained = load_causal_lm(str(tiny_model), train=False)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sync_into_worker(infer, trained)
    assert not infer.engine.sessions.sessions
    nxt = prompt + first["token_ids"] + [50, 51]
    second = infer.generate([nxt], GREEDY, sessions=["ep"])[0]
    assert "cached_tokens" not in second  # nothing reused
    tok = load_tokenizer(str(tiny_model))
    fresh = HFInferEngine(trained, [tok.eos_token_id], tok.pad_token_id)
    ref = fresh.generate([nxt], GREEDY)[0]
    assert second["token_ids"] == ref.token_ids
    assert second["logprobs"] == pytest.approx(ref.logprobs, abs=1e-5)

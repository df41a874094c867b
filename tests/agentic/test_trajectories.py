"""Multi-turn token ids, loss masks and advantages on a known transcript (no Ray)."""

from __future__ import annotations

import pytest
import torch
from agentic_steps import agentic_step_advantages

from rollcli.algorithms.gigpo import gigpo_step_advantages, group_normalize
from rollcli.algorithms.kl import FixedKLController
from rollcli.algorithms.token_rewards import token_rewards_from_scores
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.data.micro_batch import length_sorted_micro_batches
from rollcli.pipelines.rl.episode_batch import episodes_to_batch
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits

LIMITS = Limits(max_turns=5, max_context_tokens=4096, max_new_tokens=8)


def agentic_advantages(batch, *, mode, estimator="grpo", norm_std=True, **gigpo):
    """The pipeline's advantage stage on `batch`; returns the advantages."""
    alg = AlgorithmConfig(advantage=estimator, norm_std=norm_std)
    agentic_step_advantages(
        alg,
        batch,
        group_size=2,
        mode=mode,
        max_new_tokens=8,
        kl_ctl=FixedKLController(0.0),
        **gigpo,
    )
    return batch["advantages"]


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from rollcli.strategies.hf_model import load_tokenizer

    return load_tokenizer(tiny_model)


def _play(fmt: TurnFormat, spec: EpisodeSpec, replies: list[list[int]], rewards: list[float], keys):
    """An episode of len(replies) turns; the last one terminates."""
    ep = Episode(spec)
    ep.start({"observation": "obs0", "state_key": keys[0], "actions": []}, fmt, "obs0")
    eos = fmt.tokenizer.eos_token_id
    for t, (ids, r) in enumerate(zip(replies, rewards, strict=True)):
        ep.add_reply({"token_ids": ids + [eos], "text": f"reply{t}", "finished": True})
        last = t == len(replies) - 1
        result = {
            "observation": f"obs{t + 1}",
            "reward": r,
            "terminated": last,
            "truncated": False,
            "info": {"action_is_valid": True, "success": last and r > 0},
            "state_key": keys[t + 1] if t + 1 < len(keys) else "",
        }
        ep.observe(result, fmt, LIMITS, f"obs{t + 1}")
    return ep


def test_first_prompt_and_turns_follow_the_chat_template(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    assert tokenizer.decode(fmt.first_prompt("grid")) == (
        "<|im_start|>system\nRULES<|im_end|>\n<|im_start|>user\ngrid<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    after_eos = tokenizer.decode(fmt.next_turn("grid2", reply_finished=True))
    assert after_eos == "\n<|im_start|>user\ngrid2<|im_end|>\n<|im_start|>assistant\n"
    cut = tokenizer.decode(fmt.next_turn("grid2", reply_finished=False))
    assert cut.startswith("<|im_end|>\n<|im_start|>user\ngrid2")  # a cut reply is closed for it
    with_prefix = TurnFormat(tokenizer, "RULES", reply_prefix="<answer>", user_suffix=" Move?")
    assert tokenizer.decode(with_prefix.first_prompt("g")).endswith(
        "user\ng Move?<|im_end|>\n<|im_start|>assistant\n<answer>"
    )
    assert tokenizer.decode(with_prefix.next_turn("h", True)).endswith(
        "user\nh Move?<|im_end|>\n<|im_start|>assistant\n<answer>"
    )


def test_loss_mask_is_exactly_the_model_tokens(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    ep = _play(fmt, EpisodeSpec(0, 0, 7), [[101, 102], [103]], [-0.1, 1.0], ["s0", "s1"])
    eos = tokenizer.eos_token_id
    env_ids = fmt.next_turn("obs1", reply_finished=True)
    assert ep.prompt_ids == fmt.first_prompt("obs0")
    assert ep.response_ids == [101, 102, eos, *env_ids, 103, eos]
    assert ep.loss_mask == [1, 1, 1] + [0] * len(env_ids) + [1, 1]
    assert ep.turn_spans == [(0, 3), (3 + len(env_ids), 5 + len(env_ids))]
    assert ep.episode_return == pytest.approx(0.9) and ep.success and ep.end == "terminated"
    batch = episodes_to_batch([ep], tokenizer.pad_token_id)
    mask = batch["response_mask"][0]
    assert mask.nonzero().flatten().tolist() == [0, 1, 2, 3 + len(env_ids), 4 + len(env_ids)]
    # the model sees the prompt, then exactly the conversation tokens
    width = int(batch["prompt_width"][0])
    real = batch["input_ids"][0][batch["attention_mask"][0].bool()].tolist()
    assert real == ep.prompt_ids + ep.response_ids
    assert width == len(ep.prompt_ids)


def test_context_limit_ends_the_episode_before_the_next_turn(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    ep = Episode(EpisodeSpec(0, 0, 1))
    ep.start({"observation": "o", "state_key": "a"}, fmt, "o")
    ep.add_reply({"token_ids": [5, 6], "text": "x", "finished": False})
    tight = Limits(5, len(ep.prompt_ids) + 3, 8)
    ep.observe({"observation": "o", "reward": 0.0, "info": {}}, fmt, tight, "o")
    assert ep.done and ep.end == "context" and ep.loss_mask == [1, 1]


def test_starpo_return_on_last_model_token_and_group_advantages(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    a = _play(fmt, EpisodeSpec(0, 0, 7), [[101, 102], [103]], [-0.1, 1.0], ["s0", "s1"])
    b = _play(fmt, EpisodeSpec(1, 0, 7), [[104]], [0.0], ["s0"])
    batch = episodes_to_batch([a, b], tokenizer.pad_token_id)
    adv = agentic_advantages(batch, mode="starpo", estimator="grpo")
    mask = batch["response_mask"]
    token_rewards = token_rewards_from_scores(batch["scores"], mask)
    last_a = max(mask[0].nonzero().flatten().tolist())
    assert token_rewards[0, last_a] == pytest.approx(0.9)
    assert token_rewards[0].abs().sum() == pytest.approx(0.9)  # nowhere else
    assert token_rewards[1, 1] == pytest.approx(0.0)
    # returns 0.9 and 0.0: mean 0.45, unbiased std 0.6364 -> +-0.7071 on every model token
    expected = 0.45 / (0.9 / 2**0.5 + 1e-6)
    assert adv[0][mask[0].bool()].tolist() == pytest.approx([expected] * 5, abs=1e-5)
    assert adv[1][mask[1].bool()].tolist() == pytest.approx([-expected] * 2, abs=1e-5)
    assert adv[mask == 0].abs().sum() == 0  # no advantage on env tokens or padding
    rloo = agentic_advantages(batch, mode="starpo", estimator="rloo")
    assert rloo[0, 0] == pytest.approx(0.9) and rloo[1, 0] == pytest.approx(-0.9)


def test_gigpo_groups_steps_by_identical_state_within_a_group() -> None:
    # group 0: episodes A (states s0, s1) and B (states s0, s2); group 1: C (state s0)
    rewards = [[0.0, 1.0], [-1.0, 0.0], [5.0]]
    keys = [["s0", "s1"], ["s0", "s2"], ["s0"]]
    out = gigpo_step_advantages(rewards, keys, [0, 0, 1], gamma=0.5, norm_std=False)
    # step returns: A = [0 + 0.5*1, 1] = [0.5, 1]; B = [-1, 0]; C = [5]
    # anchor (0, s0): A0=0.5, B0=-1 -> mean -0.25 -> +0.75, -0.75; s1, s2, (1, s0) alone -> 0
    assert out == [[0.75, 0.0], [-0.75, 0.0], [0.0]]
    std = gigpo_step_advantages(rewards, keys, [0, 0, 1], gamma=0.5, norm_std=True)
    assert std[0][0] == pytest.approx(0.75 / (1.5 / 2**0.5 + 1e-6))


def test_gigpo_adds_weighted_step_advantages_on_each_turns_tokens(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    a = _play(fmt, EpisodeSpec(0, 0, 7), [[101], [102]], [0.0, 1.0], ["s0", "s1"])
    b = _play(fmt, EpisodeSpec(1, 0, 7), [[103], [104]], [-1.0, 0.0], ["s0", "s2"])
    batch = episodes_to_batch([a, b], tokenizer.pad_token_id)
    starpo = agentic_advantages(batch, mode="starpo", norm_std=False)
    gigpo = agentic_advantages(batch, mode="gigpo", norm_std=False, step_weight=2.0, step_gamma=0.5)
    # episode: returns 1 and -1 -> +1 / -1; steps as in the test above: +0.75 / -0.75 on turn 1
    (a0, a1), (b0, _) = a.turn_spans, b.turn_spans
    assert starpo[0, a0[0]] == pytest.approx(1.0) and starpo[1, b0[0]] == pytest.approx(-1.0)
    assert gigpo[0, a0[0] : a0[1]].tolist() == pytest.approx([1.0 + 2 * 0.75] * 2)
    assert gigpo[0, a1[0] : a1[1]].tolist() == pytest.approx([1.0] * 2)
    assert gigpo[1, b0[0] : b0[1]].tolist() == pytest.approx([-1.0 - 2 * 0.75] * 2)


def test_group_normalize_by_hand() -> None:
    assert group_normalize([2.0, 4.0, 9.0], ["g", "g", "h"], norm_std=False) == [-1.0, 1.0, 0.0]


def test_micro_batches_keep_later_turns(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES")
    long = _play(fmt, EpisodeSpec(0, 0, 7), [[101], [102], [103]], [0.0, 0.0, 1.0], ["a", "b", "c"])
    short = _play(fmt, EpisodeSpec(1, 0, 7), [[104]], [0.0], ["a"])
    batch = episodes_to_batch([long, short], tokenizer.pad_token_id)
    for idx, micro in length_sorted_micro_batches(batch, 2):
        width = int(micro["prompt_width"][0])
        assert micro["input_ids"].shape[1] - width == len(long.response_ids)
        assert micro["response_mask"].sum() == batch["response_mask"].sum()
        assert torch.equal(idx.sort().values, torch.tensor([0, 1]))

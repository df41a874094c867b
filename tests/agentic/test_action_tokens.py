"""Where each reply's action starts (`first_action_token`), on the real chat tokenizer, and the
batch's `action_mask` built from it."""

from __future__ import annotations

import pytest

from rollcli.pipelines.rl.episode_batch import episodes_to_batch, first_action_token
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from rollcli.strategies.hf_model import load_tokenizer

    return load_tokenizer(tiny_model)


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def _piece(tokenizer, ids: list[int], k: int | None) -> str | None:
    return None if k is None else tokenizer.decode([ids[k]])


@pytest.mark.parametrize(
    ("prefix", "reply", "first"),
    [
        ("<answer>", "Down</answer>", "D"),  # the recipes: the prefix opens the answer
        ("<answer>", "  Left</answer>", "L"),  # leading spaces are not the action
        ("", "I go <answer>Up</answer>", "U"),
        ("", "<answer>", None),  # no action named
        ("", "Down", None),  # no answer tag
        ("<answer>", "</answer>", None),  # an empty answer
    ],
)
def test_first_action_token(tokenizer, prefix: str, reply: str, first: str | None) -> None:
    fmt = TurnFormat(tokenizer, "RULES", reply_prefix=prefix)
    ids = _ids(tokenizer, reply)
    piece = _piece(tokenizer, ids, first_action_token(ids, fmt))
    assert (piece.strip()[0] if piece else None) == first, (reply, piece)


def test_action_mask_marks_one_token_per_reply_that_names_an_action(tokenizer) -> None:
    fmt = TurnFormat(tokenizer, "RULES", reply_prefix="<answer>")
    ep = Episode(EpisodeSpec(0, 0, 1))
    ep.start({"observation": "o"}, fmt, "o")
    replies = ["Right</answer>", "</answer>", "Down</answer>"]  # the 2nd names nothing
    for t, text in enumerate(replies):
        ids = _ids(tokenizer, text) + [tokenizer.eos_token_id]
        ep.add_reply({"token_ids": ids, "text": "<answer>" + text, "finished": True})
        last = t == len(replies) - 1
        ep.observe(
            {"observation": "o", "reward": 0.0, "terminated": last}, fmt, Limits(5, 4096, 8), "o"
        )
    other = Episode(EpisodeSpec(1, 0, 1), **{k: getattr(ep, k) for k in ("prompt_ids", "response_ids", "loss_mask", "turn_spans", "rewards")})  # fmt: skip
    batch = episodes_to_batch([ep, other], tokenizer.pad_token_id, fmt)
    marked = batch["action_mask"][0].nonzero().flatten().tolist()
    assert marked == [ep.turn_spans[0][0], ep.turn_spans[2][0]]
    assert [tokenizer.decode([ep.response_ids[i]]) for i in marked] == ["Right", "Down"]
    assert (batch["action_mask"] <= batch["response_mask"]).all()
    assert "action_mask" not in episodes_to_batch([ep, other], tokenizer.pad_token_id).tensors

"""Chat examples, assistant-token masks, packing, preference pairs, run-sample conversion."""

from __future__ import annotations

import doctest
import importlib
import json

import pytest
import torch

from rollcli.config.data_section import DataConfig
from rollcli.data.chat import chat_examples_from_rows, chat_segments, tokenize_chat
from rollcli.data.dataset_rows import Source, read_rows
from rollcli.data.from_run import dpo_rows, sft_rows
from rollcli.data.offline_sets import load_chat_sets, load_pair_sets
from rollcli.data.packing import pack, sequence_batch, sequence_micro_batches
from rollcli.data.pairs import (
    pair_batch,
    pair_from_row,
    pair_micro_batches,
    pairs_from_rows,
    tokenize_pair,
)
from rollcli.data.prompts import DataError

MODULES = [
    "rollcli.data.chat",
    "rollcli.data.pairs",
    "rollcli.data.packing",
    "rollcli.models.student",
]
CHAT = (
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello there"},
    {"role": "user", "content": "2+3?"},
    {"role": "assistant", "content": "2 + 3 = 5"},
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from rollcli.strategies.hf_model import load_tokenizer

    return load_tokenizer(tiny_model)


def test_loss_mask_covers_exactly_the_assistant_turns(tokenizer) -> None:
    ids, mask, truncated = tokenize_chat(tokenizer, CHAT, 512)
    assert not truncated and len(ids) == len(mask)
    trained = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    assert trained == "Hello there<|im_end|>\n2 + 3 = 5<|im_end|>\n"
    whole = tokenizer.apply_chat_template(list(CHAT), tokenize=False)
    assert tokenizer.decode(ids) == whole  # the pieces add up to the rendered conversation
    assert [t for _, t in chat_segments(tokenizer, CHAT)] == [False, True, False, True]


def test_truncation_cuts_from_the_end(tokenizer) -> None:
    ids, mask, truncated = tokenize_chat(tokenizer, CHAT, 10)
    assert truncated and len(ids) == len(mask) == 10


def test_rows_in_both_formats_and_bad_rows(tmp_path) -> None:
    rows = [
        {"messages": [dict(m) for m in CHAT], "answer": "5"},
        {"prompt": "2+2?", "response": "4", "id": "x"},
    ]
    examples = chat_examples_from_rows(rows, "f.jsonl", system_prompt="Be brief.")
    assert examples[0].answer == "5" and examples[1].id == "x"
    assert examples[1].messages[0] == {"role": "system", "content": "Be brief."}
    assert examples[0].prompt_messages[-1]["content"] == "2+3?"
    with pytest.raises(DataError, match="row 1: needs a conversation .'messages'. or a prompt"):
        chat_examples_from_rows([{"text": "x"}], "f.jsonl")
    with pytest.raises(DataError, match="no assistant message"):
        chat_examples_from_rows([{"messages": [{"role": "user", "content": "x"}]}], "f.jsonl")
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": 1}\nnot json\n')
    with pytest.raises(DataError, match="bad.jsonl: not valid JSON at line 2"):
        read_rows(Source(str(path)))


def test_generated_chat_sets_have_worked_verified_answers() -> None:
    from rollcli.rewards.math_rule import math_reward

    data = DataConfig(task_args={"min_terms": 2, "max_terms": 2}, train_size=30, val_size=5)
    train, val = load_chat_sets(data, seed=3)
    assert len(val) == 5 and train
    for ex in train[:10] + val:
        assert math_reward(ex.messages[-1]["content"], ex.answer)["score"] == 1.0


def test_packing_keeps_samples_apart_and_masks_first_tokens() -> None:
    samples = [([1, 2, 3], [0, 1, 1]), ([4, 5], [1, 1]), ([6, 7, 8, 9], [0, 0, 1, 1])]
    batch = sequence_batch(samples, pad_id=0, capacity=6, packing=True)
    assert pack([3, 2, 4], 6) == [[2, 1], [0]]
    assert batch["input_ids"].tolist() == [[6, 7, 8, 9, 4, 5], [1, 2, 3, 0, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1], [0, 1, 2, 3, 4, 5]]
    assert batch["loss_mask"].tolist() == [[0, 0, 1, 1, 0, 1], [0, 1, 1, 0, 0, 0]]
    assert batch["length"].tolist() == [6, 3] and batch.meta["targets"] == 5
    unpacked = sequence_batch(samples, pad_id=0, capacity=6, packing=False)
    assert len(unpacked) == 3 and unpacked.meta["targets"] == 5
    micro = sequence_micro_batches(unpacked, 2)
    assert [m["input_ids"].shape[1] for _, m in micro] == [3, 4]  # sorted, trimmed
    assert sorted(torch.cat([i for i, _ in micro]).tolist()) == [0, 1, 2]
    # a token budget: rows x longest row at most 6, so the 3- and 4-token rows split
    budget = sequence_micro_batches(unpacked, 2, max_tokens=6)
    assert [i.tolist() for i, _ in budget] == [[1, 0], [2]]
    assert [m["input_ids"].shape for _, m in budget] == [(2, 3), (1, 4)]
    # one row over the budget still makes its own micro-batch
    assert [i.tolist() for i, _ in sequence_micro_batches(unpacked, 3, max_tokens=2)] == [
        [1],
        [0],
        [2],
    ]


def test_packed_rows_score_like_separate_rows(tiny_model, tokenizer) -> None:
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.sft_train import SFTTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    chat2 = ({"role": "user", "content": "Name a colour"}, {"role": "assistant", "content": "Red"})
    samples = [tokenize_chat(tokenizer, c, 512)[:2] for c in (CHAT, chat2, CHAT)]
    worker = SFTTrainWorker(TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3)))
    packed = worker.eval_loss(sequence_batch(samples, tokenizer.pad_token_id, 512, True))
    alone = worker.eval_loss(sequence_batch(samples, tokenizer.pad_token_id, 512, False))
    assert packed["tokens"] == alone["tokens"] > 0
    assert packed["loss"] == pytest.approx(alone["loss"], abs=1e-5)


def test_pair_formats() -> None:
    hh = {
        "chosen": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Help me\n\nAssistant: Sure.",
        "rejected": "\n\nHuman: Hi\n\nAssistant: Hello!\n\nHuman: Help me\n\nAssistant: No.",
    }
    pair = pair_from_row(hh, "a")
    assert [m["role"] for m in pair.prompt] == ["user", "assistant", "user"]
    assert (pair.chosen, pair.rejected) == ("Sure.", "No.")
    plain = pair_from_row({"prompt": "2+3?", "chosen": "5", "rejected": "6"}, "b")
    assert plain.prompt == ({"role": "user", "content": "2+3?"},)
    listed = pair_from_row(
        {
            "chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
            "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}],
        },
        "c",
    )
    assert (listed.prompt[0]["content"], listed.chosen, listed.rejected) == ("q", "a", "b")
    differing = {
        "chosen": "\n\nHuman: A\n\nAssistant: x",
        "rejected": "\n\nHuman: B\n\nAssistant: y",
    }
    pairs, skipped = pairs_from_rows([hh, differing], "f")
    assert len(pairs) == 1 and skipped == 1
    with pytest.raises(DataError, match="row 1: no 'chosen' column .* set data.chosen_key"):
        pairs_from_rows([{"prompt": "x"}], "f")


def test_pairs_tokenize_into_adjacent_rows_and_micro_batches_keep_them_together(tokenizer):
    pairs = [
        pair_from_row({"prompt": "2+3?", "chosen": "2 + 3 = 5", "rejected": "2 + 3 = 6"}, "a"),
        pair_from_row(
            {
                "prompt": "A much longer question here?",
                "chosen": "Yes",
                "rejected": "No, not at all",
            },
            "b",
        ),
    ]
    tokenized = [tokenize_pair(tokenizer, p, 256, 64) for p in pairs]
    prompt, chosen, rejected = tokenized[0]
    assert tokenizer.decode(chosen) == "2 + 3 = 5<|im_end|>\n"
    assert tokenizer.decode(prompt).endswith("<|im_start|>assistant\n")
    assert tokenize_pair(tokenizer, pairs[0], 5, 64) is None  # prompt too long
    assert len(tokenize_pair(tokenizer, pairs[1], 256, 2)[2]) == 2  # response cut
    batch = pair_batch(tokenized, tokenizer.pad_token_id)
    assert len(batch) == 4
    micro = pair_micro_batches(batch, 1)
    assert [idx.tolist() for idx, _ in micro] == [[0, 1], [2, 3]]
    width = int(batch["attention_mask"].sum(dim=1).max())
    # both pairs fit two at a time by count; a budget of one pair's padded tokens splits them
    assert len(pair_micro_batches(batch, 2)) == 1
    by_tokens = pair_micro_batches(batch, 2, max_tokens=2 * width)
    assert [idx.tolist() for idx, _ in by_tokens] == [[0, 1], [2, 3]]


def test_verifiable_pairs_have_a_correct_chosen_and_a_wrong_rejected_answer() -> None:
    from rollcli.data.prompt_sets import load_prompt_sets
    from rollcli.rewards.math_rule import verify_answer

    data = DataConfig(task_args={"min_terms": 2, "max_terms": 2}, train_size=20, val_size=5)
    train, val, skipped = load_pair_sets(data, seed=1)
    assert skipped == 0 and len(val) == 5 and train
    prompts = {p.id: p.answer for p in load_prompt_sets(data, 1)[0]}
    for pair in train:
        assert verify_answer(pair.chosen, prompts[pair.id])
        assert not verify_answer(pair.rejected, prompts[pair.id])


def _fake_run(root, rows_by_step):
    (root / "samples").mkdir(parents=True)
    (root / "recipe.yaml").write_text("name: x\npipeline: rlvr\ndata: {system_prompt: Be exact.}\n")
    for step, rows in rows_by_step.items():
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (root / "samples" / f"step-{step}.jsonl").write_text(text)


def _sample(prompt, response, reward, finished=True):
    return {
        "prompt": prompt,
        "response": response,
        "answer": "5",
        "tag": "math",
        "reward": reward,
        "correct": float(reward >= 0.9),
        "error": None,
        "finished": finished,
    }


def test_verified_samples_become_sft_and_dpo_rows(tmp_path) -> None:
    run = tmp_path / "r1"
    _fake_run(
        run,
        {
            2: [_sample("q1", "2 + 3 = 5", 1.0), _sample("q1", "it is 6", 0.0)],
            10: [
                _sample("q1", "2 + 3 = 5", 1.0),  # duplicate
                _sample("q2", "5", 1.0, finished=False),  # cut off
                _sample("q2", "five? 5", 0.9),  # correct, not cleanly formatted
            ],
        },
    )
    rows = sft_rows(run)
    assert len(rows) == 1
    assert rows[0]["messages"] == [
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "2 + 3 = 5"},
    ]
    assert len(sft_rows(run, include_unfinished=True)) == 2
    assert len(sft_rows(run, min_reward=0.9)) == 2
    examples = chat_examples_from_rows(rows, "out.jsonl")  # the sft pipeline reads them
    assert examples[0].answer == "5"
    pairs = dpo_rows(run)
    assert [(p["chosen"], p["rejected"]) for p in pairs] == [("2 + 3 = 5", "it is 6")]
    assert pairs_from_rows(pairs, "out.jsonl")[0][0].prompt[-1]["content"] == "q1"
    with pytest.raises(DataError, match="has no samples"):
        sft_rows(tmp_path / "nothing")

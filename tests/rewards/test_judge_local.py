"""The local judge: a transformers model in the reward worker, scored by P(yes) vs P(no)."""

from __future__ import annotations

import pytest
import torch

from rollcli.rewards.judge.local import judge_prompt, load_judge, word_token_ids
from rollcli.rewards.judge.rubric import DEFAULT_YES_NO_RUBRIC, fill_rubric
from rollcli.workers.reward import RewardArgs, RewardWorker


def test_score_is_the_yes_probability_computed_by_hand(tiny_model):
    samples = [
        {"response": "4", "prompt": "What is 2+2?", "answer": "4"},
        {"response": "a much longer answer that pads the batch differently", "prompt": "Hi?"},
    ]
    worker = RewardWorker(
        RewardArgs("judge_local", options={"model": str(tiny_model), "batch_size": 2})
    )
    results = worker.score(samples)
    assert all(r["error"] is None and 0.0 < r["score"] < 1.0 for r in results)

    lm, tok = load_judge(str(tiny_model))
    yes = word_token_ids(tok, ["yes"])
    no = word_token_ids(tok, ["no"])
    for sample, result in zip(samples, results, strict=True):
        # one sample alone, no padding: softmax of the last position's logits
        text = judge_prompt(tok, fill_rubric(DEFAULT_YES_NO_RUBRIC, sample))
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            probs = torch.softmax(lm(input_ids=ids).logits[0, -1].float(), dim=-1)
        p_yes, p_no = float(probs[yes].sum()), float(probs[no].sum())
        assert result["score"] == pytest.approx(p_yes / (p_yes + p_no), abs=1e-4)


def test_yes_and_no_spellings_map_to_distinct_tokens(tiny_model):
    _, tok = load_judge(str(tiny_model))
    yes, no = word_token_ids(tok, ["yes"]), word_token_ids(tok, ["no"])
    assert yes and no and not set(yes) & set(no)
    assert tok.decode([yes[0]]).strip().lower() == "yes"

"""IFEval-style constraints: each checked by hand on texts that pass and texts that fail."""

from __future__ import annotations

import pytest

from rollcli.rewards.ifeval import constraints as c
from rollcli.rewards.ifeval.prompts import ifeval_items
from rollcli.rewards.ifeval.reward import ifeval_reward

TEXT = "The cat sat. It was warm! Was it happy?\n\nYes, it was."  # 12 words, 4 sentences, 6 t


def test_counts_on_a_hand_counted_text():
    assert len(c.words(TEXT)) == 12
    assert len(c.sentences(TEXT)) == 4
    assert len(c.paragraphs(TEXT)) == 2
    assert c.word_count(TEXT, min=12, max=12) and not c.word_count(TEXT, max=11)
    assert c.sentence_count(TEXT, min=4) and not c.sentence_count(TEXT, max=3)
    assert c.paragraph_count(TEXT, min=2, max=2) and not c.paragraph_count(TEXT, min=3)


@pytest.mark.parametrize(
    ("name", "args", "good", "bad"),
    [
        ("include_keywords", {"keywords": ["cat", "warm"]}, TEXT, "a dog was warm"),
        ("exclude_keywords", {"keywords": ["dog"]}, TEXT, "Dog days"),
        ("keyword_frequency", {"keyword": "it", "min": 3}, TEXT, "it and it"),
        ("letter_frequency", {"letter": "t", "min": 6, "max": 6}, TEXT, "ttt"),
        ("json_format", {}, '{"a": [1, 2]}', "{'a': 1}"),
        ("bullet_count", {"min": 2, "max": 2}, "* one\n* two", "* one\n* two\n* three"),
        ("title", {}, "<<My Day>>\ntext", "<My Day> text"),
        (
            "ends_with",
            {"phrase": "Is there anything else?"},
            "Done. Is there anything else?",
            "Is there anything else? Done.",
        ),
        ("starts_with", {"phrase": "Dear"}, "Dear all", "Hello dear"),
        ("lowercase", {}, "all lower, ok.", "One Capital"),
        ("uppercase", {}, "ALL UPPER!", "ALL UPPEr"),
        ("no_commas", {}, "no commas at all", TEXT),
        ("placeholder_count", {"min": 2}, "at [place] on [date]", "at [place] on date"),
        ("postscript", {}, "Body.\nP.S. see you", "Body. P.S. inline"),
        ("quotation", {}, '"wrapped"', 'half "wrapped"'),
    ],
)
def test_each_constraint_accepts_the_good_text_and_rejects_the_bad(name, args, good, bad):
    assert c.check(good, {"type": name, **args}) is True
    assert c.check(bad, {"type": name, **args}) is False


def test_letter_frequency_counts_by_hand():
    # The, cat, sat, It, it, it: six t's in any case
    assert c.letter_frequency(TEXT, "T", min=6, max=6)
    assert c.letter_frequency("Mississippi", "s", min=4, max=4)
    assert not c.letter_frequency("Mississippi", "s", max=3)


def test_a_bad_constraint_names_the_problem():
    with pytest.raises(ValueError, match="did you mean 'word_count'"):
        c.check("x", {"type": "word_cout"})
    with pytest.raises(ValueError, match="bad arguments"):
        c.check("x", {"type": "word_count", "most": 3})


def test_reward_is_the_fraction_met_with_per_constraint_metrics():
    spec = [
        {"type": "lowercase"},
        {"type": "no_commas"},
        {"type": "word_count", "max": 3},
        {"type": "include_keywords", "keywords": ["sun"]},
    ]
    out = ifeval_reward("the sun, shining today", constraints=spec)
    # lowercase yes, no_commas no, <= 3 words no (4), keyword yes
    assert out["score"] == 0.5 and out["correct"] == 0.0
    assert out["ifeval/lowercase"] == 1.0 and out["ifeval/no_commas"] == 0.0
    assert out["ifeval/word_count"] == 0.0 and out["ifeval/include_keywords"] == 1.0
    from_answer = ifeval_reward("the sun", '{"constraints": [{"type": "lowercase"}]}')
    assert from_answer == {"score": 1.0, "correct": 1.0, "ifeval/lowercase": 1.0}


def test_generated_prompts_are_seeded_and_checkable():
    items = ifeval_items(20, seed=5)
    assert items == ifeval_items(20, seed=5) and items != ifeval_items(20, seed=6)
    for _text, spec in items:
        assert 1 <= len(spec) <= 2 and len({s["type"] for s in spec}) == len(spec)
        for s in spec:
            c.check("some text", s)  # every generated constraint is valid

"""Validation sets are distinct problems and share none with training, for every source."""

from __future__ import annotations

import json

import pytest

from rollcli.config.data_section import DataConfig, MixDomainConfig
from rollcli.data.prompt_sets import load_prompt_sets
from rollcli.data.prompts import DataError

# one-digit a + b, a - b: 200 distinct problems at most
NARROW = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def _texts(prompts) -> list[tuple[str, ...]]:  # noqa: ANN001
    return [tuple(m["content"] for m in p.messages) for p in prompts]


def _check(train, val, size: int) -> None:  # noqa: ANN001
    assert len(val) == size
    assert len(set(_texts(val))) == size, "duplicates inside validation"
    assert not set(_texts(train)) & set(_texts(val)), "training shares validation problems"


def test_default_validation_size_is_256_for_a_generator() -> None:
    assert DataConfig().val_size is None  # unset: 256 for a generator, all of a val file
    assert len(load_prompt_sets(DataConfig(), seed=0)[1]) == 256


def test_generated_validation_is_distinct_even_where_draws_repeat() -> None:
    # 150 of ~200 possible problems: plain draws of 150 repeat many (the old set had duplicates)
    data = DataConfig(task_args=NARROW, train_size=400, val_size=150)
    train, val = load_prompt_sets(data, seed=3)
    _check(train, val, 150)
    assert train and len(train) < 400  # the training draws that were validation problems left
    assert (train, val) == load_prompt_sets(data, seed=3)
    # a smaller set is the start of the same sequence (roll eval --n picks a prefix)
    _, first = load_prompt_sets(data.model_copy(update={"val_size": 20}), seed=3)
    assert first == val[:20]


def test_too_few_distinct_problems_is_one_clear_error() -> None:
    data = DataConfig(task_args=NARROW, val_size=256)
    with pytest.raises(DataError, match=r"only \d+ distinct problems .* data.val_size = 256"):
        load_prompt_sets(data, seed=0)


def test_humaneval_split_is_distinct_and_disjoint() -> None:
    train, val = load_prompt_sets(DataConfig(source="humaneval", val_size=40), seed=0)
    _check(train, val, 40)
    assert len(train) == 164 - 40


def test_ifeval_validation_is_distinct_and_disjoint() -> None:
    train, val = load_prompt_sets(DataConfig(source="ifeval", train_size=300, val_size=50), 1)
    _check(train, val, 50)


def _write(path, questions: list[str]) -> str:  # noqa: ANN001
    path.write_text("".join(json.dumps({"prompt": q, "answer": "1"}) + "\n" for q in questions))
    return str(path)


def test_file_hold_out_skips_duplicates_and_drops_them_from_training(tmp_path) -> None:
    # the last rows repeat earlier ones: the held-out set is the last 3 distinct prompts
    path = _write(tmp_path / "d.jsonl", ["a", "b", "c", "d", "b", "e", "e", "d"])
    train, val = load_prompt_sets(DataConfig(source="file", train_path=path, val_size=3), 0)
    assert [p.messages[-1]["content"] for p in val] == ["b", "e", "d"]
    assert [p.messages[-1]["content"] for p in train] == ["a", "c"]
    _check(train, val, 3)


def test_file_with_too_few_distinct_prompts_is_refused(tmp_path) -> None:
    path = _write(tmp_path / "d.jsonl", ["a", "b", "a", "b", "a"])
    with pytest.raises(DataError, match="has 2 distinct prompts, not more than data.val_size = 2"):
        load_prompt_sets(DataConfig(source="file", train_path=path, val_size=2), 0)


def test_val_file_is_deduplicated_and_removed_from_training(tmp_path) -> None:
    train_path = _write(tmp_path / "t.jsonl", ["a", "b", "c", "a"])
    val_path = _write(tmp_path / "v.jsonl", ["c", "a", "c"])
    data = DataConfig(source="file", train_path=train_path, val_path=val_path)
    train, val = load_prompt_sets(data, 0)
    assert [p.messages[-1]["content"] for p in val] == ["c", "a"]
    assert [p.messages[-1]["content"] for p in train] == ["b"]


def test_mix_validation_is_distinct_and_disjoint() -> None:
    mix = {
        "math": MixDomainConfig(ratio=1, source="reasoning_gym", task_args=NARROW),
        "writing": MixDomainConfig(ratio=1, source="ifeval"),
    }
    train, val = load_prompt_sets(
        DataConfig(source="mix", mix=mix, train_size=200, val_size=120), 2
    )
    _check(train, val, 120)

"""`data.sample: {n, by}`: a seeded sample stratified by a column, on a dataset and on a
`data.mix` domain, counted by hand."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rollcli.config.data_section import DataConfig
from rollcli.data.dataset_rows import RowSample, Source, read_table
from rollcli.data.prompt_sets import load_prompt_data
from rollcli.data.prompts import DataError
from rollcli.data.stratified import stratified_sample

# 10 easy, 4 medium, 1 hard
LEVELS = ["easy"] * 10 + ["medium"] * 4 + ["hard"]


def _write(tmp_path, levels=LEVELS):
    path = tmp_path / "kod.jsonl"
    rows = [
        {
            "question": f"q{i}",
            "final_answer": str(i),
            "gpt_difficulty": d,
            "difficulty": 1.0 + i % 3,
        }
        for i, d in enumerate(levels)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_equal_share_per_stratum_and_a_small_stratum_gives_all():
    # dealt round robin in sorted order (easy, hard, medium): 9 rows are the rounds
    # (e, h, m), (e, m), (e, m), (e, m): hard gives its 1, easy and medium share the rest;
    # 13 rows: medium gives its 4 too, easy fills the other 8
    cases = {3: (1, 1, 1), 9: (4, 1, 4), 13: (8, 1, 4), 15: (10, 1, 4)}
    for n, (easy, hard, medium) in cases.items():
        picked = stratified_sample(LEVELS, n, seed=3)
        got = Counter(LEVELS[i] for i in picked)
        assert (got["easy"], got["hard"], got["medium"]) == (easy, hard, medium)
        assert picked == sorted(set(picked))  # distinct rows, in dataset order


def test_seeded_deterministic_and_prefix_stable():
    a = stratified_sample(LEVELS, 7, seed=5)
    assert a == stratified_sample(LEVELS, 7, seed=5)
    assert set(a) <= set(stratified_sample(LEVELS, 11, seed=5))  # a larger n keeps them
    assert any(stratified_sample(LEVELS, 7, seed=s) != a for s in range(6, 12))


def test_read_table_samples_and_errors_name_the_columns_and_counts(tmp_path):
    source = Source(str(_write(tmp_path)))
    rows, _ = read_table(source, sample=RowSample(6, "gpt_difficulty", 0))
    assert Counter(r["gpt_difficulty"] for r in rows) == {"easy": 3, "medium": 2, "hard": 1}
    rows, _ = read_table(source, sample=RowSample(6, "difficulty", 0))  # numeric: by value
    assert Counter(r["difficulty"] for r in rows) == {1.0: 2, 2.0: 2, 3.0: 2}
    with pytest.raises(DataError) as missing:
        read_table(source, sample=RowSample(6, "level", 0, "data.mix.code.sample"))
    assert str(missing.value) == (
        f"data.mix.code.sample.by = 'level' names no column of {source.path} (its columns: "
        "question, final_answer, gpt_difficulty, difficulty)"
    )
    with pytest.raises(DataError, match=r"data.sample.n = 99 but .* has 15 rows; lower"):
        read_table(source, sample=RowSample(99, "gpt_difficulty", 0))


def test_a_mix_domain_trains_on_its_sample(tmp_path):
    path = _write(tmp_path)
    data = DataConfig(
        source="mix",
        train_size=5,
        val_size=2,
        mix={
            "code": {
                "ratio": 1.0,
                "path": str(path),
                "prompt_key": "question",
                "answer_key": "final_answer",
                "sample": {"n": 6, "by": "gpt_difficulty"},
            }
        },
    )
    sets = load_prompt_data(data, seed=0)
    texts = {p.messages[-1]["content"] for p in [*sets.train, *sets.val]}
    rows, _ = read_table(Source(str(path)), sample=RowSample(6, "gpt_difficulty", 0))
    assert texts == {r["question"] for r in rows}  # 4 training + 2 held out, all sampled

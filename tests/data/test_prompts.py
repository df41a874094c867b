from __future__ import annotations

import json

import pytest

from rollcli.config.data_section import DataConfig
from rollcli.data.dataset_prompts import file_prompts
from rollcli.data.prompt_sets import load_prompt_sets
from rollcli.data.prompts import DataError, reasoning_gym_prompts


def test_reasoning_gym_prompts_are_seeded_and_answered() -> None:
    a = reasoning_gym_prompts(
        "chain_sum",
        {"min_terms": 2, "max_terms": 2},
        5,
        seed=1,
        suffix="Reply with only the number.",
    )
    b = reasoning_gym_prompts(
        "chain_sum",
        {"min_terms": 2, "max_terms": 2},
        5,
        seed=1,
        suffix="Reply with only the number.",
    )
    assert a == b
    assert a[0].messages[-1]["content"].endswith("Reply with only the number.")
    # the answer is the true value of the expression in the question
    expr = a[0].messages[-1]["content"].split(":")[1].split("=")[0]
    assert int(a[0].answer) == eval(expr)  # noqa: S307 - digits and +/- from our own generator


def test_unknown_task_has_did_you_mean() -> None:
    with pytest.raises(DataError, match="did you mean 'chain_sum'"):
        reasoning_gym_prompts("chain_sun", {}, 2, seed=0)


def test_validation_split_is_fixed_and_disjoint_from_train() -> None:
    data = DataConfig(train_size=300, val_size=40)
    train, val = load_prompt_sets(data, seed=5)
    train2, val2 = load_prompt_sets(data, seed=5)
    assert val == val2 and train == train2
    val_text = {p.messages[-1]["content"] for p in val}
    assert not any(p.messages[-1]["content"] in val_text for p in train)


def test_file_prompts_accept_prompt_or_messages(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [
        {"prompt": "2+2?", "answer": "4", "tag": "math"},
        {"messages": [{"role": "user", "content": "3+3?"}], "answer": 6},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    prompts = file_prompts(str(path), system_prompt="Be brief.")
    assert prompts[0].messages == (
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    )
    assert prompts[1].answer == "6" and prompts[1].tag == "math"


def test_file_errors_name_the_row(tmp_path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "x"}\n')
    with pytest.raises(DataError, match="row 1: no 'answer' column .*set data.answer_key"):
        file_prompts(str(path))
    path.write_text('{"prompt": "x", "answer": 1}\nnot json\n')
    with pytest.raises(DataError, match="d.jsonl: not valid JSON at line 2"):
        file_prompts(str(path))
    with pytest.raises(DataError, match="does not exist"):
        file_prompts(str(tmp_path / "missing.jsonl"))

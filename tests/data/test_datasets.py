"""Datasets as users have them, read through `datasets`: GSM8K as published (`question`,
`answer` ending in `#### 72`) from jsonl, parquet, csv, gzip, a folder of splits, a
`save_to_disk` folder and a hub-cache layout (offline), mapped by the `data.*` keys."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hub_cache import cache_repo

from rollcli.config.data_section import DataConfig
from rollcli.data.columns import Columns, fill_template
from rollcli.data.dataset_rows import Source, read_rows
from rollcli.data.prompt_sets import fit_prompts, load_prompt_data, load_prompt_sets
from rollcli.data.prompts import DataError

GSM8K = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k"
pytestmark = pytest.mark.skipif(not GSM8K.exists(), reason=f"{GSM8K} is not on this machine")
PATTERN = r"####\s*(.+)$"


def gsm8k(**keys: object) -> DataConfig:
    return DataConfig(prompt_key="question", answer_pattern=PATTERN, **keys)


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    lines = (GSM8K / "train.jsonl").read_text().splitlines()[:40]
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="module")
def formats(tmp_path_factory, rows) -> dict[str, Path]:
    """The same 40 rows as jsonl, jsonl.gz, parquet, csv and a save_to_disk folder."""
    import datasets

    root = tmp_path_factory.mktemp("formats")
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (root / "d.jsonl").write_text(text)
    with gzip.open(root / "d.jsonl.gz", "wt") as fh:
        fh.write(text)
    table = datasets.Dataset.from_list(rows)
    table.to_parquet(str(root / "d.parquet"))
    table.to_csv(str(root / "d.csv"), index=False)
    table.save_to_disk(str(root / "saved"))
    names = ("d.jsonl", "d.jsonl.gz", "d.parquet", "d.csv", "saved")
    return {name: root / name for name in names}


def test_the_raw_gsm8k_file_maps_to_prompts_and_answers() -> None:
    sets = load_prompt_data(gsm8k(path=str(GSM8K / "train.jsonl")), seed=0)
    assert len(sets.train) + len(sets.val) == 7473 and len(sets.val) == 256
    first = sets.train[0]
    assert first.messages[-1]["content"].startswith("Natalia sold clips to 48 of her friends")
    assert first.answer == "72" and first.tag == "math"


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz", "d.parquet", "d.csv", "saved"])
def test_every_format_reads_the_same_prompts(formats, name) -> None:
    data = gsm8k(path=str(formats[name]), val_size=5)
    train, val = load_prompt_sets(data, seed=0)
    reference = load_prompt_sets(gsm8k(path=str(formats["d.jsonl"]), val_size=5), seed=0)
    strip = [(p.messages, p.answer) for p in train + val]
    assert strip == [(p.messages, p.answer) for p in reference[0] + reference[1]]
    assert (len(train), len(val), train[0].answer) == (35, 5, "72")


def test_a_folder_of_split_files_and_its_val_split(tmp_path, rows) -> None:
    for split, part in (("train", rows[:30]), ("test", rows[30:])):
        (tmp_path / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    train, val = load_prompt_sets(gsm8k(path=str(tmp_path), val_split="test"), seed=0)
    assert (len(train), len(val)) == (30, 10)
    with pytest.raises(DataError, match="data.val_split = 'dev': .* has the splits"):
        load_prompt_sets(gsm8k(path=str(tmp_path), val_split="dev"), seed=0)


def test_a_hub_dataset_reads_offline_from_the_hub_cache(tmp_path, monkeypatch, rows) -> None:
    import datasets

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    card = tmp_path / "README.md"
    card.write_text(  # GSM8K's card lists two configurations; only `main` is cached here
        "---\nconfigs:\n"
        + "".join(
            f"- config_name: {c}\n  data_files:\n  - split: train\n    path: {c}/train-*\n"
            f"  - split: test\n    path: {c}/test-*\n"
            for c in ("main", "socratic")
        )
        + "---\n# gsm8k\n"
    )
    files = {"README.md": card}
    for split, part in (("train", rows[:30]), ("test", rows[30:])):
        local = tmp_path / f"{split}.parquet"
        datasets.Dataset.from_list(part).to_parquet(str(local))
        files[f"main/{split}-00000-of-00001.parquet"] = local
    cache_repo(tmp_path / "hf" / "hub", "openai/gsm8k", files, repo_type="dataset")
    data = gsm8k(path="openai/gsm8k", name="main", val_split="test", val_size=4)
    train, val = load_prompt_sets(data, seed=0)
    assert (len(train), len(val), train[0].answer) == (30, 4, "72")
    with pytest.raises(DataError, match="openai/gsm8k has the configurations main, socratic"):
        read_rows(Source("openai/gsm8k"))
    with pytest.raises(DataError) as err:
        read_rows(Source("openai/other", split="train"))
    assert "hf download openai/other --repo-type dataset" in str(err.value)


def test_val_size_samples_a_validation_file_and_eval_takes_its_start() -> None:
    data = gsm8k(path=str(GSM8K / "train.jsonl"), val_path=str(GSM8K / "test.jsonl"))
    assert len(load_prompt_data(data, seed=0).val) == 1319  # unset: every row
    eight = load_prompt_data(data.model_copy(update={"val_size": 8}), seed=0)
    four = load_prompt_sets(data.model_copy(update={"val_size": 4}), seed=0)[1]
    assert len(eight.val) == 8 and four == eight.val[:4]
    assert "validation: a seeded sample of 8 of 1319 prompts" in eight.notes
    sampled = load_prompt_data(data.model_copy(update={"train_size": 100}), seed=0)
    assert len(sampled.train) == 100 and "a seeded sample of 100 of 7473" in sampled.notes[0]


def test_a_template_names_columns_and_keeps_other_braces(formats) -> None:
    template = "{question}\nPut the final answer in \\boxed{}."
    data = DataConfig(path=str(formats["d.jsonl"]), prompt_template=template, val_size=2)
    first = load_prompt_sets(data, seed=0)[0][0]
    assert first.messages[-1]["content"].endswith(
        "in April and May?\nPut the final answer in \\boxed{}."
    )
    with pytest.raises(DataError, match=r"data.prompt_template names \{quest\}, not a column"):
        fill_template("{quest}", {"question": "x"}, "row 1")


def test_columns_the_reward_names_ride_with_the_prompt(tmp_path) -> None:
    rows = [{"q": f"{i}+1?", "a": str(i + 1), "level": i % 3, "notes": "x"} for i in range(6)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = DataConfig(path=str(tmp_path / "d.jsonl"), prompt_key="q", answer_key="a", val_size=2)
    sets = load_prompt_data(data, seed=0, reward_columns={"level", "absent"})
    assert [p.columns for p in sets.train] == [{"level": i % 3} for i in range(4)]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({}, "row 1: no prompt: .* set data.prompt_key .e.g. data.prompt_key=question."),
        (
            {"prompt_key": "question", "answer_key": "solution"},
            "data.answer_key = 'solution' names no column",
        ),
        (
            {"prompt_key": "question", "answer_pattern": "ANSWER: (.+)"},
            "matches the answer of none of its",
        ),
    ],
)
def test_a_file_training_would_refuse_names_the_row_and_the_key(formats, keys, message) -> None:
    with pytest.raises(DataError, match=message) as err:
        load_prompt_sets(DataConfig(path=str(formats["d.jsonl"]), **keys), seed=0)
    assert "(its columns: answer, question)" in str(err.value) or "answer_pattern" in keys


@pytest.mark.parametrize("answer_key", [None, "ground_truth"])
def test_an_answer_inside_a_struct_column_is_suggested_by_its_dotted_key(
    tmp_path, answer_key
) -> None:
    """verl-style rows keep the answer in a struct (`reward_model: {ground_truth: ...}`):
    the refusal listed the column `reward_model` and no way to read inside it; it now
    names the dotted key, which reads it."""
    rows = [{"prompt": f"{i}+1?", "reward_model": {"ground_truth": str(i + 1), "style": "rule"}}
            for i in range(6)]  # fmt: skip
    (tmp_path / "v.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = DataConfig(path=str(tmp_path / "v.jsonl"), answer_key=answer_key, val_size=2)
    with pytest.raises(DataError) as err:
        load_prompt_sets(data, seed=0)
    assert (
        "(e.g. data.answer_key=reward_model.ground_truth, a field of the struct column "
        "reward_model) (its columns: prompt, reward_model, reward_model.ground_truth, "
        "reward_model.style)"
    ) in str(err.value)
    suggested = data.model_copy(update={"answer_key": "reward_model.ground_truth"})
    train, val = load_prompt_sets(suggested, seed=0)
    assert sorted(p.answer for p in train + val) == [str(i + 1) for i in range(6)]


def test_overlong_prompts_are_left_out_or_refused(tiny_model) -> None:
    from rollcli.data.prompts import Prompt
    from rollcli.strategies.hf_model import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    prompts = [
        Prompt(f"p{i}", ({"role": "user", "content": "word " * n},), "1")
        for i, n in enumerate((5, 300, 7))
    ]
    kept, ids, note = fit_prompts(tokenizer, prompts, 256, "drop", "training prompts")
    assert [p.id for p in kept] == ["p0", "p2"] and len(ids) == 2
    assert note == "1 of 3 training prompts over 256 tokens left out (data.max_prompt_tokens)"
    with pytest.raises(
        DataError,
        match="1 of 3 training prompts are over data.max_prompt_tokens = 256 tokens .the first, 'p1'",
    ):
        fit_prompts(tokenizer, prompts, 256, "error", "training prompts")
    with pytest.raises(
        DataError, match="all 1 training prompts are over .* raise data.max_prompt_tokens"
    ):
        fit_prompts(tokenizer, prompts[1:2], 256, "drop", "training prompts")


def test_columns_of_roll_own_schema_stay_the_defaults() -> None:
    row = {"messages": [{"role": "user", "content": "2+2?"}], "answer": 4}
    columns = Columns()
    assert columns.require_prompt(row, "r") == ({"role": "user", "content": "2+2?"},)
    assert columns.answer(row, "r") == "4"

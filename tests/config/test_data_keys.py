"""The data section's keys: text overrides kept as typed, every key set applies or is
refused, paths and user code resolved against the recipe's folder (or the current one)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.user_code import load_object, resolve_ref

GSM = ["data.path=train.jsonl", "data.prompt_key=question"]


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    (tmp_path / "train.jsonl").write_text('{"question": "1+1?", "answer": "x #### 2"}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_text_keys_keep_the_override_as_typed(here) -> None:
    cfg, _ = load_recipe(
        "rlvr-math",
        [*GSM, r"data.answer_pattern=####\s*(.+)$", "data.prompt_key=null"]
        + ["data.prompt_template={question}", "run.run_id=0123"],
    )
    assert cfg.data.answer_pattern == r"####\s*(.+)$"  # YAML would read a comment: null
    assert cfg.data.prompt_template == "{question}"  # YAML would read a mapping
    assert cfg.data.prompt_key is None and cfg.run.run_id == "0123"


def test_a_dataset_on_the_command_line_replaces_the_recipes_generator(here) -> None:
    cfg, _ = load_recipe("rlvr-math", GSM)
    assert cfg.data.source == "file" and cfg.data.path == str(here / "train.jsonl")
    assert cfg.data.train_size is None and cfg.data.task_args == {}
    assert cfg.data.val_size == 256  # the recipe's, which applies to a dataset too
    with pytest.raises(ConfigError, match="data.task applies to data.source = 'reasoning_gym'"):
        load_recipe("rlvr-math", [*GSM, "data.task=basic_arithmetic"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.chosen_key=good"], "data.chosen_key applies to the dpo pipeline"),
        (["data.messages_key=chat"], "data.messages_key applies to the sft and distill pipelines"),
        (["data.val_split=train"], "validation would be data.split = 'train' of"),
        (["data.answer_pattern=(a)(b)"], "has 2 groups; it needs exactly one"),
        (["data.answer_pattern=(unclosed"], "is not a regular expression"),
        (
            ["data.prompt_template={question}"],
            "set data.prompt_key or data.prompt_template, not both",
        ),
        (["data.prompt_key=null", "data.prompt_template=Answer:"], "names no column"),
        (["data.overlong=maybe"], "data.overlong"),
        (["data.train_path=train.jsonl"], "train_path and path name the same thing"),
    ],
)
def test_a_data_key_that_would_not_apply_is_refused(here, overrides, message) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        load_recipe("rlvr-math", [*GSM, *overrides])
    assert "\n" not in str(err.value)


def test_dataset_keys_without_a_dataset_are_refused(here) -> None:
    with pytest.raises(ConfigError, match="data.name applies to a dataset read from data.path"):
        load_recipe("rlvr-math", ["data.name=main"])


def test_offline_pipelines_refuse_the_keys_they_do_not_read(here) -> None:
    with pytest.raises(ConfigError, match="data.answer_key applies to the rlvr and sft and"):
        load_recipe("dpo", ["data.path=train.jsonl", "data.answer_key=answer"])
    with pytest.raises(ConfigError, match="sft cuts each sample at sft.max_tokens"):
        load_recipe("sft", ["data.max_prompt_tokens=64"])


def test_paths_in_a_recipe_file_are_the_recipes_and_on_the_command_line_ours(
    tmp_path, monkeypatch
) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "train.jsonl").write_text('{"prompt": "q", "answer": "1"}\n')
    (project / "score.py").write_text("def score(response, answer, **kw):\n    return 1.0\n")
    recipe = {
        "name": "mine",
        "pipeline": "rlvr",
        "data": {"path": "data/train.jsonl"},
        "reward": {"fn": "score.py:score"},
    }
    (project / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "val.jsonl").write_text('{"prompt": "v", "answer": "2"}\n')
    monkeypatch.chdir(elsewhere)
    cfg, _ = load_recipe(str(project / "recipe.yaml"), ["data.val_path=val.jsonl"])
    assert cfg.data.path == str(project / "data" / "train.jsonl")  # the recipe's folder
    assert cfg.data.val_path == str(elsewhere / "val.jsonl")  # typed here: this folder
    assert cfg.reward.fn == f"{project / 'score.py'}:score"
    # a file next to the recipe, named on the command line from another folder
    cfg, _ = load_recipe(str(project / "recipe.yaml"), ["reward.fn=./score.py:score"])
    assert cfg.reward.fn == f"{project / 'score.py'}:score"
    with pytest.raises(ConfigError, match="no file 'nope.py' .looked in "):
        load_recipe(str(project / "recipe.yaml"), ["reward.fn=nope.py:score"])


def test_user_code_loads_by_file_and_by_module_from_the_recipes_folder(tmp_path) -> None:
    (tmp_path / "helpers_for_roll_test.py").write_text("BONUS = 0.5\n")
    (tmp_path / "reward.py").write_text(  # a name an installed module might also have
        "from helpers_for_roll_test import BONUS\n"
        "def score(response, answer, **kw):\n    return BONUS\n"
    )
    package = tmp_path / "mypkg_for_roll_test"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "util.py").write_text("SCALE = 2.0\n")
    (package / "rewards.py").write_text(
        "from .util import SCALE\ndef score(response, answer, **kw):\n    return SCALE\n"
    )
    by_module = resolve_ref("mypkg_for_roll_test.rewards:score", [tmp_path], "reward.fn")
    assert by_module == f"{package / 'rewards.py'}:score"
    assert load_object(by_module, "reward.fn")("r", "a") == 2.0
    by_file = resolve_ref("reward.py:score", [tmp_path], "reward.fn")
    assert by_file == f"{tmp_path / 'reward.py'}:score"
    assert load_object(by_file, "reward.fn")("r", "a") == 0.5
    assert resolve_ref("json:loads", [tmp_path], "reward.fn") == "json:loads"  # importable
    assert resolve_ref("math", [tmp_path], "reward.fn") == "math"  # a built-in name
    assert resolve_ref("no_such_pkg_x.mod:f", [tmp_path], "reward.fn") == "no_such_pkg_x.mod:f"
    with pytest.raises(ValueError, match="cannot import 'no_such_pkg_x.mod' .* next to the recipe"):
        load_object("no_such_pkg_x.mod:f", "reward.fn")
    sys.modules.pop("mypkg_for_roll_test.rewards", None)


def test_a_run_saved_before_datasets_were_sampled_reads_the_same_rows(tmp_path) -> None:
    cfg, _ = load_recipe("rlvr-math")
    raw = cfg.model_dump(mode="json")
    (tmp_path / "train.jsonl").write_text('{"prompt": "q", "answer": "1"}\n')
    (tmp_path / "val.jsonl").write_text('{"prompt": "v", "answer": "1"}\n')
    data = {k: v for k, v in raw["data"].items() if k != "path"}
    data.update(source="file", train_path=str(tmp_path / "train.jsonl"), task_args={})
    data.update(train_size=2000, val_size=256, val_path=str(tmp_path / "val.jsonl"))
    data.update(task="chain_sum", val_split=None)
    saved = tmp_path / "recipe.yaml"
    saved.write_text(yaml.safe_dump({**raw, "data": data}))
    old, _ = load_recipe(str(saved), [], saved_run=True)
    assert (old.data.train_size, old.data.val_size) == (None, None)  # unsampled, as it ran


def test_a_mix_domain_reads_a_dataset_with_the_same_keys(tmp_path, monkeypatch) -> None:
    from rollcli.data.prompt_sets import load_prompt_sets

    rows = [{"q": f"{i} + {i} =", "a": f"#### {2 * i}"} for i in range(30)]
    (tmp_path / "gsm.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.chdir(tmp_path)
    domain = "data.mix.math"
    cfg, _ = load_recipe(
        "rlvr-mix",
        [f"{domain}.path=gsm.jsonl", f"{domain}.prompt_key=q", f"{domain}.answer_key=a"]
        + [rf"{domain}.answer_pattern=####\s*(.+)$", f"{domain}.task_args={{}}"]
        + [f"{domain}.source=file", f"{domain}.task=chain_sum"],
    )
    math = cfg.data.mix["math"]
    assert (math.path, math.prompt_key) == (str(tmp_path / "gsm.jsonl"), "q")
    train, val = load_prompt_sets(cfg.data, seed=0)
    mine = [p for p in train + val if p.tag == "math"]
    assert mine and all(
        p.answer == str(2 * int(p.messages[-1]["content"].split()[0])) for p in mine
    )


def test_agentic_user_code_keys_resolve_against_the_recipe(tmp_path) -> None:
    from rollcli.config.recipe_paths import resolve_paths

    (tmp_path / "tools.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    raw = {"agentic": {"env": "tool", "env_kwargs": {"tools": ["calculator", "tools.py:add"]}}}
    out = resolve_paths(raw, [tmp_path])
    assert out["agentic"]["env_kwargs"]["tools"] == ["calculator", f"{tmp_path / 'tools.py'}:add"]
    assert raw["agentic"]["env_kwargs"]["tools"][1] == "tools.py:add"  # a copy, not in place

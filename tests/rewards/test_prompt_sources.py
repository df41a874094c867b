"""Prompt sources for code and multi-domain RLVR: HumanEval, user jsonl with tests, ifeval, mix."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from rollcli.config.data_section import DataConfig
from rollcli.data.dataset_prompts import file_prompts
from rollcli.data.prompt_sets import load_prompt_sets
from rollcli.data.prompts import DataError, humaneval_prompts


def test_humaneval_prompts_hold_the_stub_and_the_tests():
    problems = humaneval_prompts()
    assert len(problems) == 164 and problems[0].id == "HumanEval/0"
    p = problems[0]
    assert p.tag == "code"
    assert "```python\nfrom typing import List" in p.messages[-1]["content"]
    spec = json.loads(p.answer)
    assert spec["entry_point"] == "has_close_elements"
    assert spec["tests"].lstrip().startswith("METADATA") or "def check(candidate)" in spec["tests"]
    assert spec["stub"].rstrip().endswith('"""')


def test_humaneval_split_is_fixed_and_disjoint():
    a_train, a_val = load_prompt_sets(DataConfig(source="humaneval", val_size=16), seed=1)
    b_train, b_val = load_prompt_sets(DataConfig(source="humaneval", val_size=16), seed=2)
    assert [p.id for p in a_val] == [p.id for p in b_val]  # whatever the seed
    assert len(a_train) == 148 and not {p.id for p in a_train} & {p.id for p in a_val}
    few, _ = load_prompt_sets(DataConfig(source="humaneval", val_size=16, train_size=10), seed=1)
    assert len(few) == 10
    with pytest.raises(DataError, match="leaves no HumanEval problem"):
        load_prompt_sets(DataConfig(source="humaneval", val_size=164), seed=1)


def test_user_jsonl_with_tests_and_constraints(tmp_path):
    path = tmp_path / "code.jsonl"
    rows = [
        {"prompt": "Write add(a, b).", "tests": ["assert add(1, 2) == 3"]},
        {"prompt": "Say hi in lowercase.", "constraints": [{"type": "lowercase"}]},
        {"prompt": "2+2?", "answer": "4"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    code, instr, math = file_prompts(str(path))
    assert (code.tag, instr.tag, math.tag) == ("code", "ifeval", "math")
    assert json.loads(code.answer) == {"tests": ["assert add(1, 2) == 3"]}
    assert json.loads(instr.answer) == {"constraints": [{"type": "lowercase"}]}
    (tmp_path / "bad.jsonl").write_text('{"prompt": "x"}\n')
    with pytest.raises(DataError, match="nor 'tests' or 'constraints'"):
        file_prompts(str(tmp_path / "bad.jsonl"))


def test_mix_sizes_follow_the_ratios_and_prompts_carry_their_domain():
    data = DataConfig(
        source="mix",
        train_size=400,
        val_size=10,
        mix={
            "math": {"ratio": 2, "source": "reasoning_gym", "task": "chain_sum"},
            "code": {"ratio": 1, "source": "humaneval"},
            "general": {"ratio": 1, "source": "ifeval"},
        },
    )
    train, val = load_prompt_sets(data, seed=3)
    assert Counter(p.tag for p in train) == {"math": 200, "code": 100, "general": 100}
    assert Counter(p.tag for p in val) == {"math": 5, "code": 2, "general": 2}  # 2.5 rounds to 2
    assert len({p.id for p in train}) == len(train)
    assert not {p.id for p in train} & {p.id for p in val}
    code = next(p for p in train if p.tag == "code")
    assert code.id.startswith("code/HumanEval/") and "tests" in json.loads(code.answer)


def test_mix_repeats_a_small_source_to_keep_its_share():
    data = DataConfig(
        source="mix",
        train_size=400,
        val_size=60,
        mix={
            "code": {"ratio": 1, "source": "humaneval"},
            "general": {"ratio": 1, "source": "ifeval"},
        },
    )
    train, _ = load_prompt_sets(data, seed=0)
    code = [p for p in train if p.tag == "code"]
    assert len(code) == 200  # 134 problems left after 30 held out, then repeated
    assert sum("#1" in p.id for p in code) == 200 - 134

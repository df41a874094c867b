"""Fixture datasets with the columns of the ROLL paper's RLVR datasets (a few rows each,
written by the test; no row of the real datasets): DeepMath-103K, KodCode-Light-RL-10K,
Multi-subject-RLVR, Nemotron-CrossThink (QA) and RLVR-IFeval, and the overrides that
point `rlvr-paper`'s domains at them."""

from __future__ import annotations

import json
from pathlib import Path

KODCODE_TEST = """from solution import add

def test_small():
    assert add(1, 2) == 3

def test_zero():
    assert add(0, 0) == 0
"""


def _deepmath(i: int) -> dict:
    return {
        "question": f"What is {i} + {i}?",
        "final_answer": str(2 * i),
        "difficulty": [3.0, 4.5, 6.0][i % 3],
        "topic": "Mathematics -> Algebra",
        "r1_solution_1": "...",
    }


def _kodcode(i: int) -> dict:
    return {
        "question": f"Write add(a, b) returning a + b (variant {i}).",
        "solution": "def add(a, b):\n    return a + b\n",
        "test": KODCODE_TEST,
        "test_info": [{"function_name": "add", "parameter_list": "(a, b)"}],
        "gpt_difficulty": ["easy", "medium", "hard"][i % 3],
        "subset": "Leetcode",
    }


def _judge(i: int) -> dict:
    return {
        "query": [
            {"role": "system", "content": "Solve the problem."},
            {"role": "user", "content": f"Which test confirms finding {i}?"},
        ],
        "label": "Western blot",
    }


def _crossthink(i: int) -> dict:
    return {
        "data_source": "Nemotron-CrossThink-QA",
        "prompt": [{"role": "user", "content": f"Question {i}: pick one. (A) x (B) y"}],
        "ability": "QA",
        "reward_model": {"ground_truth": "B", "style": "rule"},
        "meta_data": {"index": i},
    }


def _ifeval(i: int) -> dict:
    truth = {"func_name": "validate_lowercase", "N": None, "keyword_list": None}
    return {
        "messages": [{"role": "user", "content": f"Describe owl {i} in lowercase only."}],
        "ground_truth": json.dumps(truth),
        "constraint_type": "Change Cases",
        "constraint": "Your entire response should be in English, and in all lowercase letters.",
    }


DOMAINS = {
    "math_rule": _deepmath,
    "code_sandbox": _kodcode,
    "llm_judge": _judge,
    "crossthinkqa": _crossthink,
    "ifeval": _ifeval,
}


def write_paper_data(folder: Path, rows: int = 12) -> list[str]:
    """One jsonl file per domain in `folder`; the overrides pointing rlvr-paper at them (a
    file has one split, `train`, so CrossThink's `train_qa` is overridden) and sampling
    fewer rows than the fixtures hold."""
    overrides = []
    for domain, make in DOMAINS.items():
        path = folder / f"{domain}.jsonl"
        path.write_text("".join(json.dumps(make(i)) + "\n" for i in range(rows)))
        overrides.append(f"data.mix.{domain}.path={path}")
    overrides += [
        "data.mix.crossthinkqa.split=train",
        "data.mix.math_rule.sample.n=9",
        "data.mix.code_sandbox.sample.n=6",
        "data.train_size=20",
        "data.val_size=5",
    ]
    return overrides

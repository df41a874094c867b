"""Reward files and datasets as verl, TRL and OpenRLHF users have them (our own code, written
the way each project's users write theirs), for the tests of reward conventions
(tests/rewards/test_conventions.py, tests/e2e/test_other_projects.py).

Twelve sums `a + b` in each layout: verl's preprocessed parquet (`data_source`, a chat
`prompt`, `reward_model.ground_truth`, `extra_info`), a TRL conversational `save_to_disk`
dataset (`prompt` messages, `solution`), OpenRLHF's `input` / `label` jsonl.
"""

from __future__ import annotations

import json
from pathlib import Path

VERL_REWARD = '''import re


def extract_solution(solution_str):
    """The last number of the reply (verl's gsm8k scorer reads `#### N`; a flexible one
    reads the last number)."""
    numbers = re.findall(r"-?[0-9]+(?:\\.[0-9]+)?", solution_str.replace(",", ""))
    return numbers[-1] if numbers else None


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    assert data_source == "sums", data_source
    answer = extract_solution(solution_str)
    acc = float(answer is not None and float(answer) == float(ground_truth))
    return {"score": acc, "acc": acc, "index": float(extra_info["index"])}
'''

TRL_REWARD = '''import re


def accuracy_reward(completions, solution, **kwargs):
    """Reward function that checks if the completion's last number is the solution."""
    contents = [completion[0]["content"] for completion in completions]
    rewards = []
    for content, sol in zip(contents, solution):
        numbers = re.findall(r"-?\\d+", content)
        rewards.append(1.0 if numbers and numbers[-1] == sol else 0.0)
    return rewards


def format_reward(completions, **kwargs):
    """Reward function that checks if the completion ends with a number."""
    pattern = r".*\\d\\s*\\.?$"
    completion_contents = [completion[0]["content"] for completion in completions]
    matches = [re.match(pattern, content, re.DOTALL) for content in completion_contents]
    return [1.0 if match else 0.0 for match in matches]
'''

OPENRLHF_REWARD = '''import re

import torch


def reward_func(queries, prompts, labels):
    """queries are prompts + responses; labels are the answers."""
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels):
        response = query[len(prompt):]
        numbers = re.findall(r"-?\\d+", response)
        rewards.append(float(bool(numbers) and numbers[-1] == label))
    rewards = torch.tensor(rewards, dtype=torch.float)
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {"response_chars": torch.tensor([float(len(q)) for q in queries])},
    }
'''

PLAIN_REWARD = """def score(response, answer):
    return float(response.strip().endswith(answer))
"""


def sums(n: int = 12) -> list[tuple[str, str]]:
    """`n` (question, answer) pairs of two-number sums."""
    return [(f"What is {i + 3} + {2 * i + 1}?", str(3 * i + 4)) for i in range(n)]


def write_verl_parquet(path: Path) -> Path:
    """verl's examples/data_preprocess layout, as `to_parquet` writes it."""
    import datasets

    rows = [
        {
            "data_source": "sums",
            "prompt": [{"role": "user", "content": f"{q} Let's think step by step."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": a},
            "extra_info": {"split": "train", "index": i, "answer": a, "question": q},
        }
        for i, (q, a) in enumerate(sums())
    ]
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def write_trl_dataset(path: Path) -> Path:
    """A TRL conversational prompt-only dataset with a `solution` column, `save_to_disk`."""
    import datasets

    rows = [{"prompt": [{"role": "user", "content": q}], "solution": a} for q, a in sums()]
    datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


def write_openrlhf_jsonl(path: Path) -> Path:
    """OpenRLHF's `--input_key input --label_key label` jsonl."""
    path.write_text("".join(json.dumps({"input": q, "label": a}) + "\n" for q, a in sums()))
    return path

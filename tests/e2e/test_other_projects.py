"""Reward files as verl, TRL and OpenRLHF users write them train unchanged through `roll
train` on data in their project's layout (issue #81), as does `def score(response,
answer)`: one step of tiny-random each, the CLI app in this process on the suite's Ray
(tests/roll_in_process.py). verl's is the default tier; the others are the slow tier (the
same path, another convention: tests/rewards/test_conventions.py covers each call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from other_projects import (
    OPENRLHF_REWARD,
    PLAIN_REWARD,
    TRL_REWARD,
    VERL_REWARD,
    write_openrlhf_jsonl,
    write_trl_dataset,
    write_verl_parquet,
)
from roll_in_process import cli

pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)
ONE_STEP = [
    "--model", "tiny-random", "--steps", "1", "--eval-every", "0", "data.val_size=2",
    "rollout.batch_size=4", "rollout.group_size=2", "rollout.max_new_tokens=4",
    "train.micro_batch_size=4",
]  # fmt: skip


def _train(tmp_path: Path, code: str, fn: str, keys: list[str]) -> dict:
    """One step with the reward file `code`; the step's metrics row."""
    (tmp_path / "reward.py").write_text(code)
    runs = tmp_path / "runs"
    code_, err = cli(
        "train", "rlvr-math", *ONE_STEP, "--runs-dir", str(runs), "--run-id", "r",
        f"reward.fn={tmp_path / 'reward.py'}:{fn}", *keys,
    )  # fmt: skip
    assert code_ == 0, err[-3000:]
    assert "warning:" not in err, err[-3000:]
    rows = [json.loads(line) for line in (runs / "r" / "metrics.jsonl").open()]
    step = rows[-1]
    assert step["step"] == 1 and step["reward/errors"] == 0.0
    return step


def test_a_verl_compute_score_trains_on_verl_parquet(tmp_path: Path, tiny_model) -> None:
    path = write_verl_parquet(tmp_path / "train.parquet")
    keys = [f"data.path={path}", "data.answer_key=reward_model.ground_truth"]
    step = _train(tmp_path, VERL_REWARD, "compute_score", keys)
    assert 0.0 <= step["reward/acc"] <= 1.0  # the dict's other number: a metric
    assert 0.0 <= step["reward/index"] <= 9.0  # extra_info's row index reached it


@pytest.mark.slow
def test_trl_conversational_rewards_train_on_a_save_to_disk_dataset(tmp_path, tiny_model):
    path = write_trl_dataset(tmp_path / "saved")
    keys = [f"data.path={path}", "data.answer_key=solution"]
    _train(tmp_path, TRL_REWARD, "accuracy_reward", keys)


@pytest.mark.slow
def test_an_openrlhf_reward_func_trains_on_input_label_jsonl(tmp_path, tiny_model) -> None:
    path = write_openrlhf_jsonl(tmp_path / "train.jsonl")
    keys = [f"data.path={path}", "data.prompt_key=input", "data.answer_key=label"]
    step = _train(tmp_path, OPENRLHF_REWARD, "reward_func", keys)
    assert step["reward/response_chars"] > 0  # extra_logs: a metric


@pytest.mark.slow
def test_a_two_parameter_score_trains(tmp_path: Path, tiny_model) -> None:
    path = write_openrlhf_jsonl(tmp_path / "train.jsonl")
    keys = [f"data.path={path}", "data.prompt_key=input", "data.answer_key=label"]
    _train(tmp_path, PLAIN_REWARD, "score", keys)

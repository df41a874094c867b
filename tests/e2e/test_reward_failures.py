"""A reward that cannot run stops the run with one line, instead of training on zeros
(issue #22, item 5), through the CLI app in this process and real Ray (tiny-random)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from error_text import error_message
from roll_in_process import cli

pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


def test_a_reward_with_the_wrong_signature_stops_the_run(tmp_path: Path, tiny_model) -> None:
    code, err = cli(
        "train",
        "rlvr-math",
        "--runs-dir",
        str(tmp_path),
        "--run-id",
        "broken",
        "--model",
        "tiny-random",
        "--steps",
        "3",
        "--eval-every",
        "0",
        "data.train_size=8",
        "data.val_size=2",
        "rollout.group_size=2",
        "rollout.batch_size=4",
        "rollout.max_new_tokens=4",
        "reward.fn=broken_rewards:wrong_signature",
    )
    assert code == 2, err[-3000:]
    # the error is the last thing printed, from "error:", wrapped at 80 columns
    assert error_message(err[err.index("error:") :]) == (
        "error: reward 'broken_rewards:wrong_signature' failed on every sample at step 1 "
        "(4 samples): TypeError: wrong_signature() got an unexpected keyword argument 'tag'"
    ), err[-3000:]
    assert err.count("error:") == 1
    assert "Traceback" not in err
    rows = [json.loads(line) for line in (tmp_path / "broken" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [0]  # no step trained on the zeros

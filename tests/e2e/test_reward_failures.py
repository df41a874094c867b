"""A reward that cannot run stops the run with one line, instead of training on zeros
(issue #22, item 5), through the real CLI and Ray (tiny-random)."""

from __future__ import annotations

import json
from pathlib import Path

from roll_subprocess import roll

HERE = Path(__file__).parent


def test_a_reward_with_the_wrong_signature_stops_the_run(tmp_path: Path, tiny_model) -> None:
    result = roll(
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
        cwd=tmp_path,
        pythonpath=HERE,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    # the progress display may leave its line open: the error is the last line, from "error:"
    last = result.stderr.strip().splitlines()[-1]
    assert last[last.index("error:") :] == (
        "error: reward 'broken_rewards:wrong_signature' failed on every sample at step 1 "
        "(4 samples): TypeError: wrong_signature() got an unexpected keyword argument 'tag'"
    ), result.stderr[-3000:]
    assert result.stderr.count("error:") == 1
    assert "Traceback" not in result.stderr
    rows = [json.loads(line) for line in (tmp_path / "broken" / "metrics.jsonl").open()]
    assert [r["step"] for r in rows] == [0]  # no step trained on the zeros

"""Every weight sync is verified (rollcli/pipelines/rl/sync_verify.py): a sync that leaves a
tensor of actor_infer's model stale (`stale@sync:1`, injected) stops the run with one line
and a failed status; with `run.sync_retry=true` the sync is made once more and the run goes
on. The CLI app in this process, on the suite's Ray session (tests/roll_in_process.py)."""

from __future__ import annotations

import json

import pytest
from roll_in_process import cli

pytestmark = pytest.mark.usefixtures("ray_session")
# random weights score 0: the entropy bonus moves them, so step 1's weights differ
SMALL = [
    "--model", "tiny-random", "--steps", "1", "rollout.batch_size=4", "rollout.group_size=2",
    "rollout.max_new_tokens=4", "data.val_size=2", "data.train_size=20", "run.eval_every=0",
    "train.micro_batch_size=2", "train.lr=1e-3", "algorithm.entropy_coef=0.01",
]  # fmt: skip


def test_a_stale_sync_stops_the_run_in_one_line(tmp_path, tiny_model) -> None:
    args = ["train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "stale", *SMALL]
    code, err = cli(*args, fault="stale@sync:1")
    assert code == 2, err[-2000:]
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, err[-2000:]
    flat = " ".join(err.split())
    assert "the weight sync after step 1 failed its check: actor_infer rank 0's" in flat
    assert "is not actor_train's" in flat and "Traceback" not in err
    status = json.loads((tmp_path / "stale" / "status.json").read_text())
    assert status["status"] == "failed" and "WeightSyncError" in status["error"]
    assert "error: the weight sync after step 1" in (tmp_path / "stale" / "events.log").read_text()


@pytest.mark.slow  # ~35 s; the default tier keeps the stale sync that stops the run
def test_with_sync_retry_the_sync_is_made_again(tmp_path, tiny_model) -> None:
    args = ["train", "rlvr-math", "--runs-dir", str(tmp_path), "--run-id", "retry", *SMALL]
    code, err = cli(*args, "run.sync_retry=true", fault="stale@sync:1")
    assert code == 0, err[-2000:]
    events = (tmp_path / "retry" / "events.log").read_text()
    assert "warning: the weight sync after step 1 failed its check" in events
    rows = [json.loads(x) for x in (tmp_path / "retry" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["sync/verified"] == 1.0 and rows[-1]["time/sync_check_s"] >= 0

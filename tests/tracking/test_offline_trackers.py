"""SwanLab and W&B in offline mode write runs that their own readers load back: every
metric at its step, the recipe as the run's config, the sample table, and a rewind (a
resume) that starts a new run instead of logging a step twice. Skipped when the extra is
absent (`make test` installs both); tests/tracker_readers.py says how each is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tracker_readers import (
    swanlab_records,
    swanlab_scalars,
    wandb_history,
    wandb_records,
    wandb_run,
)

from rollcli.tracking.fanout import make_trackers

RECIPE = {"name": "rlvr-math", "train": {"lr": 1e-6, "steps": 3}}
ROWS = [
    {"prompt": "1+1=", "response": "2", "reward": 1.0},
    {"prompt": "2+2=", "response": "5", "reward": 0.0},
]
FIRST = {(k, s): v for s in (1, 2, 3) for k, v in (("reward/mean", s / 4), ("loss", -s))}
AFTER_REWIND = {("reward/mean", 2): 12.0, ("reward/mean", 3): 13.0}


def _log_three_steps_then_rewind(tracker: str, run_dir: Path) -> None:
    trackers = make_trackers(["jsonl", tracker], run_dir, RECIPE, "run-a")
    for step in (1, 2, 3):
        trackers.log({"step": step, "time": 99.0, "reward/mean": step / 4, "loss": -step}, step)
    trackers.log_samples(3, ROWS)
    trackers.rewind(1)  # a resume from the step-1 checkpoint: steps 2 and 3 come again
    for step in (2, 3):
        trackers.log({"step": step, "reward/mean": 10.0 + step}, step)
    trackers.close()


def test_swanlab_offline_run_reads_back(tmp_path: Path) -> None:
    pytest.importorskip("swanlab")
    _log_three_steps_then_rewind("swanlab", tmp_path)
    # the rewind finished the first run and opened a second (oldest first)
    runs = sorted(
        (tmp_path / "swanlab").glob("run-*"),
        key=lambda f: swanlab_records(f)[0].timestamp.ToNanoseconds(),
    )
    assert len(runs) == 2
    first, second = swanlab_records(runs[0]), swanlab_records(runs[1])
    assert swanlab_scalars(first) == FIRST
    assert swanlab_scalars(second) == AFTER_REWIND  # no step twice within a run
    samples = [r.media for r in first if r.HasField("media")]
    assert [(m.key, m.step, len(m.value.items)) for m in samples] == [("samples", 3, 2)]
    texts = [(runs[0] / "media" / "text" / i.filename).read_text() for i in samples[0].value.items]
    assert [json.loads(t) for t in texts] == ROWS
    config = yaml.safe_load((runs[0] / "files" / "config.yaml").read_text())
    assert {k: v["value"] for k, v in config.items()} == RECIPE
    assert not (tmp_path / "metrics.jsonl").exists()  # jsonl is the run folder's, not a tracker


def test_wandb_offline_run_reads_back(tmp_path: Path) -> None:
    pytest.importorskip("wandb")
    pytest.importorskip("swanlab", reason="the .wandb reader comes with swanlab's converter")
    _log_three_steps_then_rewind("wandb", tmp_path)
    runs = sorted(
        (tmp_path / "wandb").glob("offline-run-*"),
        key=lambda f: wandb_run(wandb_records(f)).start_time.ToNanoseconds(),
    )
    assert len(runs) == 2
    first, second = wandb_records(runs[0]), wandb_records(runs[1])
    assert wandb_history(first) == FIRST
    assert wandb_history(second) == AFTER_REWIND
    run = wandb_run(first)
    assert (run.display_name, run.run_group, run.project) == ("run-a", "run-a", "roll")
    config = {u.key: json.loads(u.value_json) for u in run.config.update if u.key != "_wandb"}
    assert config == RECIPE
    (table_file,) = (runs[0] / "files" / "media" / "table").glob("samples_*.table.json")
    table = json.loads(table_file.read_text())
    assert table["columns"] == ["prompt", "response", "reward"]
    assert table["data"] == [[r["prompt"], r["response"], r["reward"]] for r in ROWS]


def test_sample_rows_of_mixed_types_make_a_wandb_table() -> None:
    pytest.importorskip("wandb")
    import wandb

    from rollcli.tracking.wandb_tracker import table_data

    rows = [  # agentic rows carry lists; a field may be a bool in one row, a number in another
        {"prompt": "p", "reward": 1.0, "correct": True, "turns": [{"a": 1}]},
        {"prompt": "q", "reward": 0, "correct": 0.5, "error": "timeout"},
    ]
    columns, data = table_data(rows)
    assert columns == ["prompt", "reward", "correct", "turns", "error"]
    assert data == [
        ["p", 1.0, "True", '[{"a": 1}]', None],
        ["q", 0, "0.5", None, "timeout"],
    ]
    wandb.Table(columns=columns, data=data)  # raises on a column of mixed types
    with pytest.raises(TypeError):
        wandb.Table(columns=["correct"], data=[[True], [0.5]])

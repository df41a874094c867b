"""`run.trackers` and `run.tracker_mode`: validated names, metrics.jsonl always written, the offline /
online rule, and the TensorBoard tracker read back with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.config.trackers import tracker_problems, wants_online, where_it_logs
from rollcli.tracking.fanout import make_trackers


def test_default_trackers_keep_metrics_jsonl_and_tensorboard() -> None:
    cfg, _ = load_recipe("rlvr-math", [])
    assert cfg.run.trackers == ("jsonl", "tensorboard") and cfg.run.tracker_mode == "offline"
    cfg, _ = load_recipe("rlvr-math", ["run.trackers=[jsonl,swanlab,wandb]"])
    assert cfg.run.trackers == ("jsonl", "swanlab", "wandb")


@pytest.mark.parametrize(
    ("override", "resolved"),
    [
        ("run.trackers=[tensorboard,wandb]", ("jsonl", "tensorboard", "wandb")),
        ("run.trackers=[wandb,jsonl]", ("wandb", "jsonl")),
        ("run.trackers=[]", ("jsonl",)),
    ],
)
def test_the_list_names_the_extra_trackers_and_metrics_jsonl_is_always_kept(
    override: str, resolved: tuple[str, ...]
) -> None:
    cfg, _ = load_recipe("rlvr-math", [override])
    assert cfg.run.trackers == resolved


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("run.trackers=[jsonl,wandbb]", "unknown tracker 'wandbb' (did you mean 'wandb'?)"),
        ("run.trackers=[jsonl,jsonl]", "lists a tracker twice"),
        ("run.tracker_mode=online", "has no online tracker; add one of swanlab, wandb"),
    ],
)
def test_bad_tracker_settings_fail_with_one_line(override: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_recipe("rlvr-math", [override])
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_old_tensorboard_flag_still_reads_for_saved_runs() -> None:
    cfg, _ = load_recipe("rlvr-math", ["run.tensorboard=false"])
    assert cfg.run.trackers == ("jsonl",)
    with pytest.raises(ConfigError, match="run.tensorboard and run.trackers are both set"):
        load_recipe("rlvr-math", ["run.tensorboard=true", "run.trackers=[jsonl]"])


def test_online_only_when_asked_and_only_with_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("WANDB_MODE", "WANDB_API_KEY", "SWANLAB_MODE", "SWANLAB_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert not wants_online("wandb", "offline")
    assert where_it_logs("wandb", "offline", "roll") == "offline: runs/<run-id>/wandb/"
    monkeypatch.setenv("WANDB_API_KEY", "k")  # a key alone does not send anything
    assert not wants_online("wandb", "offline")
    assert not wants_online("tensorboard", "online")
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setenv("WANDB_MODE", "online")
    (problem,) = tracker_problems(["jsonl", "wandb"], "offline")
    assert "WANDB_API_KEY is not set" in problem
    assert tracker_problems(["swanlab"], "online")[0].startswith("swanlab is asked to log online")
    monkeypatch.setenv("WANDB_API_KEY", "k")
    assert tracker_problems(["wandb"], "offline") == []
    assert where_it_logs("wandb", "offline", "proj") == "online: project 'proj'"
    with pytest.raises(ConfigError, match="SWANLAB_API_KEY is not set"):
        make_trackers(["jsonl", "swanlab"], Path("/nonexistent"), {}, "r", mode="online")


def test_tensorboard_scalars_samples_and_rewind_read_back(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trackers = make_trackers(["jsonl", "tensorboard"], tmp_path, {}, "r")
    for step in (1, 2, 3):
        trackers.log({"step": step, "time": 5.0, "loss": float(step), "ok": True}, step)
    trackers.log_samples(1, [{"prompt": "a|b", "reward": 1.0}])
    trackers.rewind(1)
    trackers.log({"step": 2, "loss": 20.0}, 2)
    trackers.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0})
    acc.Reload()
    assert acc.Tags()["scalars"] == ["loss"]  # not step, time or booleans
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, 1.0), (2, 20.0)]
    (text,) = acc.Tensors("samples/text_summary")
    table = text.tensor_proto.string_val[0].decode()
    assert text.step == 1 and table.splitlines()[2] == "| a\\|b | 1.0 |"

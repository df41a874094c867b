"""`driver.drive`, the loop every pipeline runs, on the real SFT pipeline (tiny-random, real
Ray workers, in this process): the validation and checkpoint cadence, a Ctrl-C mid-run
(through the launcher's own signal handler), resuming from its checkpoint, and the time
limit, all read back from the run folder."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from rollcli.config.loader import dump_recipe, load_recipe
from rollcli.launch.stop_signals import StopSignals
from rollcli.runs.best import read_best
from rollcli.runs.checkpoint import latest_checkpoint, read_state
from rollcli.runs.run_dir import RunDir

SMALL = [
    "data.train_size=16",
    "data.val_size=2",
    "sft.batch_size=2",
    "sft.max_tokens=96",
    "sft.val_generate=false",
    "train.micro_batch_size=2",
    "run.keep_last=5",
]


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


class Terminal:
    """The display (a boundary we do not own: the user's terminal). At step `ctrl_c_at` the
    user presses Ctrl-C: SIGINT to this process, which `StopSignals` turns into a stop
    request."""

    def __init__(self, ctrl_c_at: int | None = None) -> None:
        self.ctrl_c_at = ctrl_c_at
        self.started: dict[str, Any] = {}
        self.shown: list[int] = []

    def start(self, **info: Any) -> None:
        self.started = info

    def phase(self, text: str) -> None: ...
    def generation(self, done: int, total: int) -> None: ...
    def message(self, text: str) -> None: ...
    def close(self) -> None: ...

    def step_done(self, step: int, metrics: dict[str, Any]) -> None:
        self.shown.append(step)
        if step == self.ctrl_c_at:
            os.kill(os.getpid(), signal.SIGINT)


def _drive(cfg, run: RunDir, terminal: Terminal, resume: bool) -> tuple[Any, dict, int]:
    """What `roll train` / `roll resume` do around the loop: the run's control, the
    pipeline, its setup (and restore), then `drive` under the Ctrl-C handler."""
    from rollcli.launch.driver import drive
    from rollcli.launch.registry import pipeline_class
    from rollcli.planning.run_plan import plan_run
    from rollcli.runtime.run_control import RunControl

    ctl = RunControl(cfg, plan_run(cfg), run, "r", terminal)
    try:
        with StopSignals(lambda: ctl, terminal):
            pipeline = pipeline_class(cfg.pipeline)(cfg, ctl, cfg.model)
            pipeline.setup()
            start = pipeline.restore(latest_checkpoint(run.checkpoints)) if resume else 0
            final = drive(pipeline, ctl, start)
    finally:
        ctl.shutdown()
    return ctl, final, start


def _count_plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The model of every plan made from now on (the planner's `make_plan`, still planning)."""
    from rollcli.planning import planner

    made: list[str] = []
    make_plan = planner.make_plan

    def counted(inp):  # noqa: ANN001, ANN202
        made.append(inp.model.name)
        return make_plan(inp)

    monkeypatch.setattr(planner, "make_plan", counted)
    return made


def _rows(run: RunDir) -> list[dict]:
    return [json.loads(line) for line in (run.root / "metrics.jsonl").read_text().splitlines()]


def _improving_validations(rows: list[dict]) -> list[int]:
    """The steps whose val/loss is below step 0's and every earlier validation's."""
    steps, best = [], rows[0]["val/loss"]
    for r in rows[1:]:
        if "val/loss" in r and r["val/loss"] < best:
            steps.append(r["step"])
            best = r["val/loss"]
    return steps


def _checkpoints(run: RunDir) -> list[str]:
    return sorted(p.name for p in run.checkpoints.iterdir() if (p / "COMPLETE").exists())


def test_cadence_ctrl_c_resume_and_time_limit(tmp_path, tiny_model, monkeypatch) -> None:
    plans = _count_plans(monkeypatch)
    flags = {"model": str(tiny_model)}
    steps = ["train.steps=6", "run.eval_every=2", "run.save_every=3"]
    cfg, _ = load_recipe("sft", [*SMALL, *steps], flags)
    run = RunDir.create(tmp_path, "r", dump_recipe(cfg))

    # steps 1..6, validation every 2, checkpoints every 3; Ctrl-C as step 5 is shown
    terminal = Terminal(ctrl_c_at=5)
    ctl, final, _ = _drive(cfg, run, terminal, resume=False)
    # the run's one plan, made before it started: its control and its workers read it
    assert len(plans) == 1 and ctl.plan.plan.model_name == plans[0]
    rows = _rows(run)
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4, 5]
    assert [r["step"] for r in rows if "val/loss" in r] == [0, 2, 4]  # 5: stopped, unvalidated
    for r in rows[1:]:  # the step's wall time holds its validation
        assert r["time/step_s"] > r.get("time/validate_s", 0.0)
    assert ctl.stopped_early and final["step"] == 5 and final["actor/loss"] == rows[5]["actor/loss"]
    # save_every, the stop's, and each validation that beat step 0 and every earlier one
    improving = _improving_validations(rows)
    assert _checkpoints(run) == sorted(f"step-{s}" for s in {3, 5, *improving})
    best = read_best(run.checkpoints)
    assert (best["step"] if best else None) == (improving[-1] if improving else None)
    state = read_state(run.checkpoints / "step-5")
    assert state["step"] == 5 and state["metrics_lines"] == 6
    assert ctl.stop_reason == "SIGINT"
    assert "stop requested (SIGINT) during step 5" in (run.root / "events.log").read_text()
    assert not list(run.samples.glob("*"))  # sft has no samples: no empty files either
    assert terminal.shown == [0, 1, 2, 3, 4, 5]

    # resumed with two more steps and a time limit that step 6 crosses: 6 is the last,
    # validated and checkpointed; no second baseline
    cfg8, _ = load_recipe("sft", [*SMALL, "train.steps=8", "run.time_limit_min=0.0001"], flags)
    terminal = Terminal()
    ctl, final, start = _drive(cfg8, run, terminal, resume=True)
    assert start == 5 and terminal.started["start_step"] == 5
    after = _rows(run)
    assert after[:6] == rows and [r["step"] for r in after] == [0, 1, 2, 3, 4, 5, 6]
    assert "val/loss" in after[6] and final["step"] == 6 and not ctl.stopped_early
    improving = _improving_validations(after)
    assert _checkpoints(run) == sorted(f"step-{s}" for s in {3, 5, 6, *improving})
    assert read_state(run.checkpoints / "step-6")["metrics_lines"] == 7
    events = (run.root / "events.log").read_text()
    assert "time limit of 0.0001 min reached after step 6" in events

    # run.save_every_min: a checkpoint once that much time passed since the last (every step
    # here), besides the last step's
    cfg8, _ = load_recipe("sft", [*SMALL, "train.steps=8", "run.save_every_min=0.0001"], flags)
    _drive(cfg8, run, Terminal(), resume=True)
    assert {"step-7", "step-8"} <= set(_checkpoints(run))


def test_a_second_signal_reraised_as_a_plain_interrupt_still_names_the_first() -> None:
    """`ray.get` turns the handler's StopNow into a plain KeyboardInterrupt; the run's status
    and its line must still say SIGTERM (a killed demo run said `interrupted (SIGINT)`)."""
    from rollcli.launch.stop_signals import StopNow

    signals = StopSignals(lambda: None, None)  # type: ignore[arg-type]
    with pytest.raises(StopNow) as info, signals:
        signals.received.append("SIGTERM")
        raise KeyboardInterrupt
    assert info.value.signal == "SIGTERM"
    with pytest.raises(KeyboardInterrupt) as plain, StopSignals(lambda: None, None):  # type: ignore[arg-type]
        raise KeyboardInterrupt  # Ctrl-C before any signal reached the handler: as it was
    assert not isinstance(plain.value, StopNow)

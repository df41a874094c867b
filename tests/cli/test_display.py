"""The live run display: what its status line says after a step."""

from __future__ import annotations

import io

from rich.console import Console

from rollcli.cli.display import RichDisplay


def _display() -> tuple[RichDisplay, io.StringIO]:
    out = io.StringIO()
    return RichDisplay(Console(file=out, width=80, force_terminal=False)), out


def test_step_time_leaves_out_the_steps_validation() -> None:
    display, out = _display()
    display.start(run_id="r", run_dir="runs/r", total_steps=2, start_step=0, engine="hf")
    display.step_done(1, {"reward/mean": 0.25, "time/step_s": 20.5})
    assert "20.5 s/step" in display.status.plain
    val = {"val/accuracy": 0.25, "val/accuracy_ci_low": 0.2, "val/accuracy_ci_high": 0.3}
    display.step_done(2, {"time/step_s": 120.8, "time/validate_s": 100.0, "val/n": 256.0, **val})
    display.close()
    assert " 20.8 s/step" in display.status.plain  # not 120.8
    assert "val acc 0.250 [0.200, 0.300]" in display.status.plain
    assert "step 2: validation accuracy 0.250 (95% CI 0.200-0.300, n=256)" in out.getvalue()

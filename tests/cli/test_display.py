"""The live run display: what its status line says after a step."""

from __future__ import annotations

import io
import re

from rich.console import Console

from rollcli.cli.display import RichDisplay, summary_table
from rollcli.runs.step_time import StepTimes


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


def test_a_second_run_on_the_display_starts_on_its_own_line_in_a_file() -> None:
    # a recipe's warm-up, then its RL run; output to a file (no terminal) must not glue the
    # warm-up's last status line to the RL run's header
    display, out = _display()
    display.start(
        run_id="warmup", run_dir="runs/r/warmup", total_steps=1, start_step=0, engine="hf"
    )
    display.step_done(1, {"time/step_s": 42.7})
    display.close()
    display.start(run_id="r", run_dir="runs/r", total_steps=1, start_step=0, engine="hf")
    display.close()
    lines = out.getvalue().splitlines()
    assert lines[2].startswith("  step 1/1 (100%), ")  # a file gets plain progress lines
    assert lines[3:] == ["roll run r  (engine: hf)", "  → runs/r"]


def test_the_header_stays_whole_at_80_columns_with_a_long_run_folder() -> None:
    display, out = _display()
    run_dir = "/work/wt-display/runs/" + "rlvr-math-20261127-091830" * 3
    display.start(run_id="rlvr-math-x", run_dir=run_dir, total_steps=1, start_step=0, engine="hf")
    display.close()
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["roll run rlvr-math-x  (engine: hf)", f"  → {run_dir}"]


def test_the_summary_step_time_is_the_live_lines_without_validation() -> None:
    """The demo's summary said "mean step time 55.9 s" where the live line said 10.7 s/step:
    it averaged whole steps, validation included."""
    rows = [
        {"step": 0, "val/accuracy": 0.05, "time/validate_s": 90.0},
        {"step": 1, "reward/mean": 0.1, "time/step_s": 10.5},
        {"step": 2, "reward/mean": 0.2, "val/accuracy": 0.3, "time/step_s": 100.9,
         "time/validate_s": 90.0},
    ]  # fmt: skip
    display, _ = _display()
    display.start(run_id="r", run_dir="runs/r", total_steps=2, start_step=0, engine="hf")
    for row in rows:
        display.step_done(row["step"], row)
    display.close()
    assert "10.9 s/step" in display.status.plain
    table = summary_table("r", "runs/r", rows[-1], rows[0], 400.0, StepTimes.of(rows))
    console = Console(file=io.StringIO(), width=80)
    console.print(table)
    text = console.file.getvalue()
    assert "│ mean step time          │ 10.7 s (no validation)   │" in text
    assert "│ validation time         │ 180 s (2 validations)    │" in text
    assert "│ wall time               │ 6.7 min (setup included) │" in text


def test_in_a_file_a_run_shows_plain_progress_lines_and_wrapped_messages() -> None:
    """Off a terminal (a log, `nohup`) a live bar shows nothing until the end: a step line
    at each tenth of the run instead, and the phase under way for the 30-s heartbeat."""
    display, out = _display()
    display.phase("starting workers")  # before the run: the phase alone
    assert display.lines is not None
    assert display.lines.line("starting workers").startswith("  starting workers, 0s so far")
    display.start(run_id="r", run_dir="runs/r", total_steps=4, start_step=0, engine="hf")
    display.phase("validating")  # the baseline, before step 1
    display.generation(16, 32)
    assert display.lines.line("step 0/4: validating").startswith("  step 0/4: validating 16/32")
    display.step_done(0, {"step": 0, "val/accuracy": 0.25})
    display.step_done(1, {"reward/mean": 0.5, "response_length/mean": 12.0, "time/step_s": 3.0})
    display.phase("training")
    assert display.lines.line("step 2/4: training").startswith("  step 2/4: training, ")
    display.message("  step 1: " + "a summary of many words " * 5)
    display.close()
    lines = out.getvalue().splitlines()
    (step,) = [line for line in lines if line.startswith("  step 1/4 (25%), ")]
    rate = r"[\d.]+(/s| s each), eta [\dhms]+"  # wall time: validation included, as eta needs
    assert re.fullmatch(rf"  step 1/4 \(25%\), {rate} · reward 0.500 · length 12.0.*", step)
    # the validation accuracy follows where it fits in 80 columns (the eta's digits vary)
    if len(step) + len(" · val acc 0.250") <= 80:
        assert step.endswith(" · length 12.0 · val acc 0.250")
    else:
        assert step.endswith(" · length 12.0")
    summary = lines[lines.index(step) + 1 :]
    assert summary[0].startswith("  step 1: a summary of many words") and len(summary) == 2
    assert summary[1].startswith("    ") and all(len(x) <= 80 for x in summary)


def test_the_last_steps_validation_is_labelled_with_its_step() -> None:
    """A one-step run's final validation read `step 0/1: validating` (the baseline's label)
    in a log: it is step 1's."""
    display, out = _display()
    display.start(run_id="r", run_dir="runs/r", total_steps=1, start_step=0, engine="hf")
    display.phase("validating")  # the baseline
    assert display._phase_task() == "step 0/1: validating"
    display.step_done(0, {"step": 0, "val/accuracy": 0.25})
    for phase in ("generating", "training", "validating"):
        display.phase(phase)
        assert display._phase_task() == f"step 1/1: {phase}"
    display.close()


def test_dpos_headline_names_its_metric_and_shows_the_implicit_reward_accuracy() -> None:
    """DPO's "val accuracy" was the summed-log-prob preference accuracy, unnamed, while TRL
    users read the implicit-reward accuracy: both now, each by its name."""
    display, out = _display()
    display.start(run_id="d", run_dir="runs/d", total_steps=2, start_step=0, engine="hf")
    base = {"step": 0, "val/accuracy": 0.625, "val/rewards/accuracy": 0.0}
    display.step_done(0, base)
    end = {"step": 2, "val/accuracy": 0.75, "val/rewards/accuracy": 0.6875, "time/step_s": 3.0}
    display.step_done(2, end)
    display.close()
    text = " ".join(out.getvalue().split())
    assert (
        "step 2: preference accuracy 0.750 (summed log-probs), implicit-reward accuracy 0.688"
    ) in text
    assert "val pref acc 0.750 · reward acc 0.688" in display.status.plain
    console = Console(file=io.StringIO(), width=80)
    console.print(summary_table("d", "runs/d", end, base, 60.0))
    table = console.file.getvalue()
    assert max(len(line) for line in table.splitlines()) <= 80
    for row in (
        "val preference accuracy (log-probs) at step 0",
        "val implicit-reward accuracy at step 0",
        "val preference accuracy (log-probs) at the end",
        "val implicit-reward accuracy at the end",
    ):
        assert row in table


def _seconds(text: str) -> float:
    """`1h05m`, `2m18s`, `45s` as seconds."""
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups()
    return 3600 * int(h or 0) + 60 * int(m or 0) + int(s or 0)


def test_the_eta_holds_steady_through_slow_validations() -> None:
    """A 40-step run: 10-s steps (the first 60 s, warming up) and a 300-s validation at
    step 0 and every 10 steps. The eta came from the rate since the start (plain lines) or
    from the last 30 s (rich's bar), and the validations swung it; past the first tenth
    each eta is now within 2x of what the one before it promised for then, on the lines
    and on the bar alike, and the first says about when the run ends."""
    clock = [0.0]
    out = io.StringIO()
    display = RichDisplay(Console(file=out, width=80), clock=lambda: clock[0], heartbeat=False)
    display.start(
        run_id="r", run_dir="runs/r", total_steps=40, start_step=0, engine="hf", eval_every=10
    )
    clock[0] += 300.0
    display.step_done(0, {"step": 0, "val/accuracy": 0.2, "time/validate_s": 300.0})
    when: dict[int, float] = {}
    bar: list[tuple[float, float]] = []
    for step in range(1, 41):
        train = 60.0 if step == 1 else 10.0
        validate = 300.0 if step % 10 == 0 else 0.0
        clock[0] += train + validate
        metrics = {"step": step, "time/step_s": train + validate}
        if validate:
            metrics |= {"val/accuracy": 0.3, "time/validate_s": validate}
        display.step_done(step, metrics)
        when[step] = clock[0]
        if 4 <= step < 40:  # past the first tenth
            bar.append((clock[0], _seconds(display.steps.tasks[0].fields["eta"])))
    display.close()
    pattern = r"step (\d+)/40 \(\d+%\), [\d.]+ s each, eta (\w+)"
    lines = [
        (when[int(step)], _seconds(eta))
        for step, eta in re.findall(pattern, out.getvalue())
        if int(step) >= 4
    ]
    assert len(lines) >= 8  # a line at each tenth at least
    for etas in (bar, lines):
        for (t0, eta0), (t1, eta1) in zip(etas, etas[1:], strict=False):
            promised = max(eta0 - (t1 - t0), 10.0)
            assert 0.5 <= max(eta1, 10.0) / promised <= 2.0, (t1, eta0, eta1)
        t, eta = etas[0]
        assert 0.5 <= (t + eta) / clock[0] <= 2.0

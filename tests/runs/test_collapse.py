"""Collapse signals on metrics lines shaped like the demo's collapse of 2026-11-25 and like a
healthy run, and the best checkpoint surviving `run.keep_last`."""

from __future__ import annotations

from pathlib import Path

from rollcli.runs.best import improves, mark_best, read_best
from rollcli.runs.checkpoint import complete_checkpoints, write_checkpoint
from rollcli.runs.collapse import CollapseWatch, collapse_signals, first_trips


def _rows(lengths, entropies, kls, fmts, corrects, vals) -> list[dict]:  # noqa: ANN001
    rows = [{"step": 0, "val/accuracy": vals[0]}]
    for step, values in enumerate(zip(lengths, entropies, kls, fmts, corrects, strict=True), 1):
        length, entropy, kl, fmt, correct = values
        rows.append(
            {
                "step": step,
                "response_length/mean": length,
                "actor/entropy": entropy,
                "actor/kl": kl,
                "reward/format": fmt,
                "reward/correct": correct,
                **({"val/accuracy": vals[step]} if step in vals else {}),
            }
        )
    return rows


# the demo's collapse: replies 24 -> 3 tokens, entropy down, KL 2.2, format up, correct down,
# validation 0.047 -> 0.137 (step 5) -> 0.031 (step 10)
COLLAPSE = _rows(
    [24, 23, 20, 18, 15, 12, 8, 5, 4, 3],
    [1.2, 1.1, 1.0, 0.9, 0.7, 0.5, 0.3, 0.2, 0.15, 0.1],
    [0.0, 0.01, 0.05, 0.1, 0.3, 0.6, 1.0, 1.5, 2.0, 2.2],
    [0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0],
    [0.06, 0.07, 0.1, 0.12, 0.1, 0.08, 0.05, 0.04, 0.03, 0.02],
    {0: 0.047, 5: 0.137, 10: 0.031},
)
HEALTHY = _rows(
    [24, 25, 23, 22, 21, 20, 20, 19, 19, 18],
    [1.2, 1.2, 1.1, 1.1, 1.0, 1.0, 0.95, 0.9, 0.9, 0.9],
    [0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09],
    [0.3, 0.35, 0.4, 0.45, 0.5, 0.5, 0.55, 0.55, 0.6, 0.6],
    [0.06, 0.07, 0.1, 0.12, 0.15, 0.2, 0.22, 0.25, 0.25, 0.3],
    {0: 0.047, 5: 0.137, 10: 0.25},
)


def test_the_demo_collapse_trips_every_signal_and_a_healthy_run_none():
    found = collapse_signals(COLLAPSE)
    assert sorted(found) == ["entropy", "format_not_correct", "kl", "length", "validation"]
    assert (
        found["length"] == "mean response length fell to 3.5 tokens (23.5 over the first 2 steps)"
    )
    assert found["kl"] == "KL to the reference is 2.10 per token (over 1)"
    assert "0.031 fell below its step-0 value 0.047 (best 0.137)" in found["validation"]
    assert collapse_signals(HEALTHY) == {}


def test_each_signal_is_reported_once_when_it_first_trips():
    watch = CollapseWatch()
    seen = {}
    for n in range(1, len(COLLAPSE) + 1):
        for name in watch.update(COLLAPSE[:n]):
            assert name not in seen
            seen[name] = COLLAPSE[n - 1]["step"]
    # KL over 1 on average over steps 7-8 (1.0, 1.5); length under half at steps 6-7 (12, 8)
    assert seen["kl"] == 8 and seen["length"] == 7 and seen["validation"] == 10


def test_prune_keeps_the_best_checkpoint_whatever_keep_last(tmp_path: Path):
    def fill(folder: Path) -> None:
        (folder / "model.safetensors").write_bytes(b"weights")

    checkpoints = tmp_path / "checkpoints"
    for step in (1, 2, 3, 4):
        write_checkpoint(checkpoints, step, fill, {"step": step}, keep_last=2)
        if step == 2:
            mark_best(checkpoints, 2, "val/accuracy", 0.3, 0.3)
    assert [s for s, _ in complete_checkpoints(checkpoints)] == [2, 3, 4]
    assert read_best(checkpoints) == {
        "step": 2,
        "metric": "val/accuracy",
        "value": 0.3,
        "score": 0.3,
    }


def test_a_best_must_beat_step_zero_and_every_earlier_validation():
    assert not improves(0.03, 0.047, None)  # below the base model: not a best
    assert improves(0.137, 0.047, None)
    assert not improves(0.1, 0.047, {"score": 0.137})
    assert improves(-1.2, -1.5, {"score": -1.3})  # losses: minus the loss, higher is better


def test_roll_plot_marks_the_steps_where_signals_first_tripped():
    from rollcli.runs.plot import draw_run

    assert first_trips(COLLAPSE) == {
        "length": 7, "entropy": 8, "kl": 8, "format_not_correct": 8, "validation": 10
    }  # fmt: skip
    fig = draw_run(COLLAPSE, title="demo")
    assert "collapse signals: length (step 7), entropy (step 8)" in fig.get_suptitle()
    kl_panel = next(ax for ax in fig.axes if ax.get_title().startswith("KL"))
    dashed = [line.get_xdata()[0] for line in kl_panel.lines if line.get_linestyle() == "--"]
    assert dashed == [7, 8, 10]
    assert "collapse" not in draw_run(HEALTHY, title="healthy").get_suptitle()

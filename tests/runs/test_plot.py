"""`roll plot`: one PNG with seven panels (eight for a tool env's run), read back pixel by
pixel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.runs.plot import PANELS, draw_run
from rollcli.runs.run_dir import RunDir

runner = CliRunner()
ALWAYS = [p for p in PANELS if not p.only_if_logged]  # drawn for every run


def _row(step: int, **extra: float) -> dict[str, float]:
    return {
        "step": step,
        "reward/mean": 0.2 + 0.05 * step,
        "actor/kl": 0.01 * step,
        "actor/entropy": 0.7 - 0.01 * step,
        "response_length/mean": 20.0 - step,
        "response_length/max": 32.0,
        "time/generate_s": 10.0,
        "time/train_s": 20.0,
        "time/step_s": 32.0,
        "perf/generate_mfu": 0.01 * step,
        "perf/forward_mfu": 0.2,
        "perf/train_mfu": 0.25,
        **extra,
    }


def _run(runs_dir: Path, rows: list[dict], run_id: str = "run-p") -> RunDir:
    run = RunDir.create(runs_dir, run_id, "name: rlvr-math\n")
    run.write_status("finished", recipe="rlvr-math", model="tiny-random", total_steps=len(rows))
    for row in rows:
        run.log_metrics(row)
    return run


def _panels(png: Path) -> list[np.ndarray]:
    """The seven panel areas of the 2000 x 900 figure (below the two title lines)."""
    image = imread(png)
    body = image[80:, :, :3]
    h, w = body.shape[0] // 2, body.shape[1] // 4
    areas = [body[r * h : (r + 1) * h, c * w : (c + 1) * w] for r in range(2) for c in range(4)]
    return areas[: len(ALWAYS)]


def test_plot_writes_a_png_with_every_panel_drawn(tmp_path: Path) -> None:
    rows = [{"step": 0, "val/accuracy": 0.25, "time/validate_s": 3.0}]
    rows += [_row(k) for k in range(1, 6)] + [_row(6, **{"val/accuracy": 0.5})]
    run = _run(tmp_path, rows)
    result = runner.invoke(app, ["plot", "run-p", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    png = run.root / "plot.png"
    assert result.stdout.strip() == str(png)

    image = imread(png)
    assert image.shape == (900, 2000, 4)
    for panel in _panels(png):
        colored = (panel.max(axis=2) - panel.min(axis=2)) > 0.2  # curves and bars, not grey text
        assert colored.mean() > 0.002
    assert not list(run.root.glob(".*tmp*"))  # written atomically


def test_titles_carry_the_run_and_the_latest_values() -> None:
    rows = [{"step": 0, "val/accuracy": 0.25}] + [_row(k) for k in range(1, 4)]
    rows[-1]["val/accuracy"] = 0.75
    fig = draw_run(rows, title="run run-p", subtitle="rlvr-math · tiny-random · finished")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "train reward  (last 0.350)",
        "validation accuracy  (0.250 → 0.750)",
        "KL to reference  (last 0.0300)",
        "entropy  (last 0.670)",
        "response length  (last 17.0)",
        "step time  (mean 32.0 s)",
        "MFU  (gen 3.0% fwd 20.0% train 25.0%)",
    ]
    assert fig.get_suptitle() == "run run-p\nrlvr-math · tiny-random · finished"
    assert all(ax.get_xlabel() == "step" for ax in fig.axes)


def test_mfu_above_the_recorded_peak_is_drawn_against_a_raised_one() -> None:
    rows = [_row(1, **{"perf/peak_gflops": 66.8, "perf/train_mfu": 1.193})]
    rows.append(_row(2, **{"perf/peak_gflops": 66.8, "perf/train_mfu": 0.5}))
    fig = draw_run(rows, title="run run-busy")
    mfu = next(ax for ax in fig.axes if ax.get_title().startswith("MFU"))
    assert mfu.get_title() == "MFU  (gen 1.7% fwd 16.8% train 41.9%, peak raised)"
    assert max(y for line in mfu.get_lines() for y in line.get_ydata()) <= 100.0


def test_missing_metrics_leave_a_panel_that_says_so(tmp_path: Path) -> None:
    rows = [{"step": k, "reward/mean": 0.1 * k, "actor/entropy": 0.5} for k in range(1, 4)]
    fig = draw_run(rows, title="run run-q")
    texts = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
    assert len(texts) == len(ALWAYS) == 7
    assert texts["validation accuracy"] == ["no 'val/accuracy' in metrics", "(no validation ran)"]
    assert texts["KL to reference"][0] == "no 'actor/kl' in metrics"
    assert texts["response length"][0] == "no 'response_length/mean' in metrics"
    assert texts["step time"][0] == "no 'time/step_s' in metrics"
    assert texts["MFU"][0] == "no 'perf/train_mfu' in metrics"

    _run(tmp_path, rows, "run-q")
    with (tmp_path / "run-q" / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 4, "reward/m')  # half written by a kill
    out = tmp_path / "elsewhere" / "q.png"
    result = runner.invoke(app, ["plot", "run-q", "-o", str(out), "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    panels = _panels(out)
    assert imread(out).shape == (900, 2000, 4)
    colored = [((p.max(axis=2) - p.min(axis=2)) > 0.2).mean() for p in panels]
    assert colored[0] > 0.002 and colored[3] > 0.002  # reward and entropy drawn
    assert max(colored[1], colored[2], colored[4], colored[5], colored[6]) < 0.0005  # text only


def test_plot_errors(tmp_path: Path) -> None:
    _run(tmp_path, [], "run-empty")
    empty = runner.invoke(app, ["plot", "run-empty", "--runs-dir", str(tmp_path)])
    assert empty.exit_code == 2 and "has no metrics yet" in empty.stderr
    _run(tmp_path, [_row(1)], "run-one")
    jpg = runner.invoke(app, ["plot", "run-one", "-o", "x.jpg", "--runs-dir", str(tmp_path)])
    assert jpg.exit_code == 2 and "is not a .png file" in jpg.stderr


def test_a_tool_env_run_gets_an_eighth_panel_of_its_tool_use(tmp_path: Path) -> None:
    tools = [
        {"env/tool_calls": 40.0, "env/tool_calls_per_episode": 1.25, "env/tool_call_valid": 0.5,
         "env/tool_error/malformed": 20.0, "env/tool_error/raised": 0.0},
        {"env/tool_calls": 32.0, "env/tool_calls_per_episode": 1.0, "env/tool_call_valid": 0.75,
         "env/tool_error/malformed": 8.0, "env/tool_error/raised": 0.0},
    ]  # fmt: skip
    rows = [_row(k + 1, **extra) for k, extra in enumerate(tools)]
    fig = draw_run(rows, title="run t")
    assert len(fig.axes) == 8 and len(PANELS) == 9  # the MoE panel only where logged
    panel = fig.axes[7]
    assert panel.get_title() == "tool use  (last 1.00, valid 0.75)"
    lines = {line.get_label(): list(line.get_ydata()) for line in panel.get_lines()}
    assert lines == {  # a kind that never occurred is not drawn
        "calls per episode": [1.25, 1.0],
        "calls that ran": [0.5, 0.75],
        "malformed per call": [0.5, 0.25],
    }
    run = _run(tmp_path, rows, "run-t")
    result = runner.invoke(app, ["plot", "run-t", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.stderr
    body = imread(run.root / "plot.png")[80:, :, :3]
    eighth = body[body.shape[0] // 2 :, 3 * body.shape[1] // 4 :]
    assert ((eighth.max(axis=2) - eighth.min(axis=2)) > 0.2).mean() > 0.002  # drawn


def test_agentic_first_action_entropy_joins_the_entropy_panel() -> None:
    rows = [_row(k, **{"agentic/first_action_entropy": 1.2 - 0.3 * k}) for k in range(1, 4)]
    fig = draw_run(rows, title="run a")
    entropy = fig.axes[3]
    assert entropy.get_title() == "entropy  (last 0.670, action 0.300)"
    lines = {line.get_label(): list(line.get_ydata()) for line in entropy.get_lines()}
    assert lines["first action"] == pytest.approx([0.9, 0.6, 0.3])


def test_agentic_episode_time_is_a_phase_of_the_step_time_panel() -> None:
    rows = [
        {"step": k, "time/step_s": 30.0, "time/rollout_s": 20.0, "time/train_s": 9.0}
        for k in (1, 2)
    ]
    fig = draw_run(rows, title="run a")
    step_time = fig.axes[5]
    legend = [t.get_text() for t in step_time.get_legend().get_texts()]
    assert sorted(legend) == ["play episodes", "train", "whole step"]
    bars = [p.get_height() for p in step_time.patches]
    assert bars == [20.0, 20.0, 9.0, 9.0]  # episodes at the bottom, train stacked on them


def test_the_sampler_vs_trainer_mismatch_joins_the_kl_panel() -> None:
    rows = [_row(k, **{"rollout/mismatch_kl": 0.001 * k}) for k in range(1, 4)]
    kl = draw_run(rows, title="run m").axes[2]
    assert kl.get_title() == "KL to reference  (last 0.0300, mismatch 0.003)"
    lines = {line.get_label(): list(line.get_ydata()) for line in kl.get_lines()}
    assert lines["sampler vs trainer"] == pytest.approx([0.001, 0.002, 0.003])
    # without a KL to the reference (kl_coef 0) the panel still draws the mismatch
    for row in rows:
        del row["actor/kl"]
    assert draw_run(rows, title="run m").axes[2].get_title() == (
        "KL to reference  (last mismatch 0.003)"
    )


def test_dpos_two_validation_accuracies_are_drawn_by_their_names() -> None:
    """DPO's implicit-reward accuracy (`val/rewards/accuracy`) was drawn as a second
    environment named `rewards` (val_env): it is its own curve, named."""
    rows = [{"step": k, "val/accuracy": 0.5 + 0.1 * k, "val/rewards/accuracy": 0.2 * k} for k in range(3)]  # fmt: skip
    fig = draw_run(rows, title="run run-dpo")
    val = next(ax for ax in fig.axes if ax.get_title().startswith("validation accuracy"))
    assert val.get_title() == "validation accuracy  (0.500 → 0.700, implicit reward 0.400)"
    labels = [line.get_label() for line in val.get_lines()]
    assert labels == ["preference (log-probs)", "implicit reward"]


def test_an_moe_run_gets_an_eighth_panel_of_its_routing() -> None:
    moe = [
        {"moe/routing_agreement": 0.54, "moe/logprob_mismatch": 2.8e-7,
         "moe/logprob_mismatch_unreplayed": 2.2e-2},
        {"moe/routing_agreement": 0.99, "moe/logprob_mismatch": 3e-7,
         "moe/logprob_mismatch_unreplayed": 3e-7},
    ]  # fmt: skip
    fig = draw_run([_row(k + 1, **extra) for k, extra in enumerate(moe)], title="run m")
    panel = fig.axes[7]
    assert panel.get_title() == "MoE routing  (last 0.990, gap 3e-07, unreplayed 3e-07)"
    assert [list(line.get_ydata()) for line in panel.get_lines()] == [[0.54, 0.99]]
    right = fig.axes[8]  # the log-prob gaps, on a log scale of their own
    assert right.get_yscale() == "log"
    assert {line.get_label() for line in right.get_lines()} == {
        "log-prob gap",
        "gap without replay",
    }

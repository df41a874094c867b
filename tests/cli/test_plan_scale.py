"""`roll plan` of any cluster size answers (a 100,000-GPU plan once took minutes: a
quadratic duplicate check and a peak search per GPU), and a size beyond what roll plans is
refused in one line. Timings live in bench/plan_scale.py, not here."""

from __future__ import annotations

from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.planning.sharing import MAX_GPUS

runner = CliRunner()
PLAN_7B = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "train.strategy=hf", "--engine", "hf"]


def test_a_100000_gpu_plan_answers_with_its_figures() -> None:
    res = runner.invoke(app, [*PLAN_7B, "--gpus", "100000"], env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output  # plain hf data parallel does not fit 80 GB
    assert "GPU 0-99999" in res.output and "hf dp=100000" in res.output
    assert "does not fit: peak 183.6 of 79.6 GiB on GPU 0" in res.output
    assert "GPU 0-99999 each need 183.6 GiB at their peak (actor_train computing)" in res.output
    assert "shard model states over 100000 GPUs with ZeRO-3" in res.output
    assert "`train.strategy=deepspeed` → fits" in res.output


def test_advice_never_suggests_more_gpus_than_roll_plans() -> None:
    # 4 GiB per GPU never fits a 7B model: the ladder ends without offering 200,000 GPUs.
    res = runner.invoke(
        app, [*PLAN_7B, "--gpus", "100000", "--gpu-mem", "4"], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 1, res.output
    assert "does not fit this setup even so" in res.output
    assert "use 200000 GPUs" not in res.output


def test_more_gpus_than_roll_plans_is_one_line_exit_2() -> None:
    res = runner.invoke(app, [*PLAN_7B, "--gpus", str(MAX_GPUS + 1)])
    assert res.exit_code == 2, res.output
    assert error_message(res.stderr) == (
        f"error: resources.gpus (--gpus) is {MAX_GPUS + 1:,}; roll plans clusters of up to "
        f"{MAX_GPUS:,} GPUs: plan a part of yours, e.g. --gpus {MAX_GPUS}"
    )

"""`roll plan`'s GPU memory flags: a bad value is one line naming the flag and what is
valid (exit 2), and a flag wins over the recipe."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.planning.devices import GPU_KINDS

runner = CliRunner()
PLAN_8 = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8"]


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_a_gpu_mem_that_is_not_positive_is_refused_naming_the_flag(value: str) -> None:
    res = runner.invoke(app, [*PLAN_8, "--gpu-mem", value])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output
    assert lines[0].startswith(f"error: --gpu-mem {value}: give the GiB per GPU as a positive")
    assert "gpu_kind" not in lines[0]  # the kind was not what was wrong


def test_gpu_mem_sets_each_gpus_capacity() -> None:
    res = runner.invoke(app, [*PLAN_8, "--gpu-mem", "24", "--json"])
    assert {d["capacity_bytes"] for d in json.loads(res.output)["devices"][:8]} == {24 * 1024**3}


def test_gpu_kind_flag_wins_over_the_recipes_gpu_mem_gib() -> None:
    res = runner.invoke(app, [*PLAN_8, "devices.gpu_mem_gib=40", "--gpu-kind", "h200", "--json"])
    assert json.loads(res.output)["devices"][0]["capacity_bytes"] == GPU_KINDS["h200"]


def test_an_unknown_gpu_kind_flag_names_the_flag() -> None:
    res = runner.invoke(app, [*PLAN_8, "--gpu-kind", "bogus"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: --gpu-kind: unknown GPU kind 'bogus'; use one of h200")

"""`roll plan`'s GPU memory flags: a bad value is one line naming the flag and what is
valid (exit 2), and a flag wins over the recipe."""

from __future__ import annotations

import json
import re

import pytest
from error_text import error_message
from typer.testing import CliRunner

from rollcli.cli.app import app
from rollcli.planning.devices import GPU_KINDS

runner = CliRunner()
PLAN_8 = ["plan", "rlvr-math", "--model", "qwen2.5-7b", "--gpus", "8", "--engine", "hf"]
PLAN_8 += ["train.strategy=hf"]  # plain hf does not fit: the advice


@pytest.mark.parametrize("value", ["0", "-5", "nan"])
def test_a_gpu_mem_that_is_not_positive_is_refused_naming_the_flag(value: str) -> None:
    res = runner.invoke(app, [*PLAN_8, "--gpu-mem", value])
    assert res.exit_code == 2, res.output
    message = error_message(res.stderr)
    assert "Traceback" not in res.output
    assert message.startswith(f"error: --gpu-mem {value}: give the GiB per GPU as a positive")
    assert "gpu_kind" not in message  # the kind was not what was wrong


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


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        (PLAN_8, 1),
        (["plan", "rlvr-math", "--model", "qwen2.5-72b", "--gpus", "1"], 1),  # a long ladder
    ],
)
def test_advice_at_80_columns_hangs_under_its_text_and_never_splits_a_key(
    args: list[str], exit_code: int
) -> None:
    res = runner.invoke(app, args, env={"COLUMNS": "80"})
    assert res.exit_code == exit_code, res.output
    lines = res.stdout.splitlines()
    advice = lines[lines.index("advice:") + 1 :]
    items = [n for n, line in enumerate(advice) if re.match(r"  \d+\. \S", line)]
    assert items and items[0] == 0
    end = next(n for n, line in enumerate(advice) if not line.startswith("  "))
    body = advice[:end]
    assert all(len(line) <= 80 for line in body)
    # a continuation line starts under the text of its item, never at column 0
    assert all(line.startswith("     ") for n, line in enumerate(body) if n not in items)
    flat = " ".join(" ".join(body).split())
    for key in re.findall(r"`[^`]+`", flat):  # every `key=value` sits on one line
        assert any(key in line for line in body), key
    assert len(body) > len(items)  # the check saw wrapped items

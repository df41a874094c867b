"""Advice reads as a short list: no two lines change the same setting (it used to print
`max_num_seqs=8`, `=2`, `=1` as three steps)."""

from __future__ import annotations

import re

import pytest

from rollcli.config.loader import load_recipe
from rollcli.planning.from_recipe import plan_recipe


@pytest.mark.parametrize(
    ("model", "gpus", "gpu_kind"),
    [
        ("qwen2.5-7b", 0, None),  # CPU: activations, micro-batch, sequences, then "does not fit"
        ("qwen3-30b-a3b", 0, None),
        ("qwen2.5-7b", 2, "4090"),
        ("qwen3-30b-a3b", 2, "a100-40g"),
    ],
)
def test_no_setting_appears_in_two_advice_lines(
    model: str, gpus: int, gpu_kind: str | None
) -> None:
    cfg, _ = load_recipe("rlvr-math", [], {"model": model, "resources.gpus": gpus})
    plan = plan_recipe(cfg, gpu_kind=gpu_kind)
    assert not plan.fits and plan.advice
    # the setting each line changes: the first `key=value` in it
    keys = [m.group(1) for line in plan.advice if (m := re.search(r"`([\w.]+)=", line))]
    assert len(keys) == len(set(keys)), plan.advice


def test_sequences_advice_is_one_line_with_the_smallest_step() -> None:
    cfg, _ = load_recipe("rlvr-math", [], {"model": "qwen2.5-7b"})
    lines = [a for a in plan_recipe(cfg).advice if "max_num_seqs" in a]
    assert len(lines) == 1 and "`devices.actor_infer.max_num_seqs=1`" in lines[0]

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


def test_no_sequences_advice_for_the_hf_engine_which_does_not_read_it() -> None:
    # the hf engine decodes 64 samples at a time whatever devices.*.max_num_seqs says (it
    # was advised here, a setting that did nothing); vLLM reads it
    cfg, _ = load_recipe("rlvr-math", [], {"model": "qwen2.5-7b"})
    assert not [a for a in plan_recipe(cfg).advice if "max_num_seqs" in a]


def test_the_hf_engine_is_planned_at_the_samples_it_holds() -> None:
    from rollcli.planning.from_recipe import recipe_plan_input

    def seqs(overrides: list[str]) -> int:
        cfg, _ = load_recipe("rlvr-math", overrides)
        return next(r for r in recipe_plan_input(cfg).roles if r.role == "actor_infer").max_num_seqs

    assert seqs(["rollout.batch_size=512", "rollout.group_size=8"]) == 64  # 8 prompts' at once
    assert seqs([]) == 40  # 8 prompts of 5: all at once

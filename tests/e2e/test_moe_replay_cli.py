"""Routing replay through the real CLI on tiny-random-moe in fp32: `router-noise@generate:1`
perturbs the engine's experts in step 1's rollout, as kernel and precision differences do.
With R3 the trainer runs the engine's experts and its log-probs of the sampled tokens match
the sampler's; with replay off they do not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from roll_subprocess import roll

ARGS = [
    "--model", "tiny-random-moe", "--steps", "1", "--eval-every", "0",
    "rollout.batch_size=8", "rollout.group_size=4", "rollout.max_new_tokens=16",
    "data.val_size=4", "train.precision=fp32", "rollout.precision=fp32",
]  # fmt: skip


def _step1(runs: Path, mode: str) -> dict:
    args = ["train", "rlvr-math", "--runs-dir", str(runs), "--run-id", mode, *ARGS]
    result = roll(
        *args, f"algorithm.router_replay={mode}", cwd=runs, fault="router-noise@generate:1"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [json.loads(x) for x in (runs / mode / "metrics.jsonl").read_text().splitlines()]
    return next(r for r in rows if r["step"] == 1)


@pytest.mark.parametrize("mode", ["R3", pytest.param("off", marks=pytest.mark.slow)])
def test_r3_closes_the_log_prob_gap_that_perturbed_experts_open(tmp_path, mode):
    step = _step1(tmp_path, mode)
    assert 1 - step["moe/routing_agreement"] >= 0.2  # the noise changed >= 20% of choices
    assert 0 <= step["moe/expert_load_cv"] < 2
    if mode == "R3":
        assert step["moe/logprob_mismatch"] <= 1e-5
        assert step["moe/logprob_mismatch_unreplayed"] >= 1e-3  # the slice without replay
    else:
        assert step["moe/logprob_mismatch"] >= 1e-3
        assert "moe/logprob_mismatch_unreplayed" not in step

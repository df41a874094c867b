"""bench/learning.py's verdicts against hand-counted outcomes, and one real run on tiny-random
(slow: a CLI training run and four held-out evaluations)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("learning_bench", REPO / "bench" / "learning.py")
learning = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(learning)


def _outcomes(right: int, n: int = 100) -> list[bool]:
    return [i < right for i in range(n)]


def test_a_seed_meets_the_targets_only_when_all_three_hold():
    rows = [{"step": 0, "val/accuracy": 0.05}, {"step": 10, "val/accuracy": 0.3}]
    base_a, base_b = _outcomes(5), _outcomes(18)
    good = learning.judge(base_a, base_b, _outcomes(30), _outcomes(18), rows)
    # (a) 25 problems only the trained model answers, none only the base: p = 2 / 2^25
    assert good["a_gain"] == (25, 0, pytest.approx(2 / 2**25))
    assert good["meets_a"] and good["meets_b"] and good["meets_c"]
    # as good as a better prompt is not enough: (c) trained (a) 0.20 vs base (b) 0.18
    prompt_level = learning.judge(base_a, base_b, _outcomes(20), _outcomes(18), rows)
    assert prompt_level["meets_a"] and not prompt_level["meets_c"]
    # damaged when asked differently: (b) 0.18 -> 0.02, p = 2 / 2^16
    damaged = learning.judge(base_a, base_b, _outcomes(30), _outcomes(2), rows)
    assert damaged["b_change"] == (0, 16, pytest.approx(2 / 2**16)) and not damaged["meets_b"]


def test_collapse_flags_and_a_final_validation_below_step_zero():
    rows = [
        {"step": 0, "val/accuracy": 0.05},
        {"step": 1, "response_length/mean": 20.0},
        {"step": 10, "response_length/mean": 3.0, "val/accuracy": 0.03},
    ]
    verdict = learning.judge(_outcomes(5), _outcomes(18), _outcomes(12), _outcomes(18), rows)
    assert verdict["flags"] == ["length 20->3", "val below step 0"]
    assert not verdict["meets_a"]  # doubled (0.05 -> 0.12) but ended below its step 0


@pytest.mark.slow
def test_the_bench_trains_and_judges_a_seed_end_to_end(tmp_path):
    cmd = [sys.executable, "bench/learning.py", "rlvr-math", "--only", "3", "--runs-dir"]
    cmd += [str(tmp_path), "--set", "model=tiny-random", "train.steps=1", "data.val_size=8"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| 3 | 0.000 [0.000, 0.324] |" in done.stdout
    assert done.stdout.strip().endswith("seeds meeting all targets: 0/1")

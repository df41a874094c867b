"""bench/learning.py: the outcomes it keeps per seed, `--judge` and `--against` on outcome
files with hand-counted verdicts, the committed arms re-judged, and one real run on
tiny-random (slow: a CLI training run and four held-out evaluations)."""

from __future__ import annotations

import importlib.util
import json
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


def test_a_seed_record_keeps_every_problem_and_the_collapse_flags():
    rows = [
        {"step": 0, "val/accuracy": 0.05},
        {"step": 1, "response_length/mean": 20.0},
        {"step": 10, "response_length/mean": 3.0, "val/accuracy": 0.03},
    ]
    entry = learning.seed_record(_outcomes(5), _outcomes(18), _outcomes(30), _outcomes(18),
                                 rows, 300.0)  # fmt: skip
    assert entry["base"] == [1] * 5 + [0] * 95 and sum(entry["trained"]) == 30
    assert entry["val_curve"] == [0.05, 0.03] and entry["flags"] == ["length 20->3"]
    assert entry["run_min"] == 5.0


def _seed(trained: int, base: int = 5, boxed: int = 18, curve=(0.05, 0.3)) -> dict:
    entry = {k: [int(x) for x in _outcomes(v)] for k, v in
             (("base", base), ("base_boxed", boxed), ("trained", trained))}  # fmt: skip
    return {**entry, "val_curve": list(curve)}


def _judge(tmp_path: Path, seeds: dict, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "outcomes.json"
    path.write_text(json.dumps({"recipe": "rlvr-math", "seeds": seeds}))
    cmd = [sys.executable, "bench/learning.py", "--judge", str(path), *extra]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_judge_prints_the_verdicts_again_and_a_seed_under_the_floor_fails(tmp_path):
    met = _judge(tmp_path, {"1": _seed(30), "2": _seed(31), "3": _seed(32)})
    assert met.returncode == 0, met.stderr
    # d = 0.12, 0.13, 0.14: mean 0.13, se 0.01 / sqrt(3), t = 22.5 with 2 df:
    # p = 1 - t / sqrt(2 + t^2) = 0.0020, interval 0.13 -+ 4.3027 se
    assert "mean +0.130 [+0.105, +0.155], t-test p = 0.002 over 3 seeds: met" in met.stdout
    assert met.stdout.rstrip().endswith("learning bar: met")
    # seed 3 only 8 / 100 against the base's 5: under twice the base
    under = _judge(tmp_path, {"1": _seed(30), "2": _seed(31), "3": _seed(8)})
    assert under.returncode == 1
    assert "2/3 seeds missed by 3 (0.080 < 2x base 0.050" in under.stdout
    assert "| 3 | 0.050 [0.022, 0.112] | 0.080 [0.041, 0.150] | 3 / 0, 0.25 |" in under.stdout


def test_judge_against_a_reference_reads_the_paired_change(tmp_path):
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps({"seeds": {"1": _seed(30), "2": _seed(32), "3": _seed(35)}}))
    worse = _judge(tmp_path, {"1": _seed(22), "2": _seed(30), "3": _seed(27)}, "--against",
                   str(ref))  # fmt: skip
    # differences -0.08, -0.02, -0.08: mean -0.060, lower bound -0.146
    assert f"against {ref} (paired, trained): -0.060 [-0.146, +0.026] over 3 seeds" in worse.stdout
    assert "lower bound under -0.05" in worse.stdout and worse.returncode == 1


def test_judge_re_judges_the_committed_arms_of_recorded_figures():
    done = subprocess.run(
        [sys.executable, "bench/learning.py", "--judge", "docs/learning/arms.json"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    arms = json.loads((REPO / "docs/learning/arms.json").read_text())["arms"]
    for name in arms:
        assert f"| {name} |" in done.stdout


@pytest.mark.slow
def test_the_bench_trains_and_judges_a_seed_end_to_end(tmp_path):
    cmd = [sys.executable, "bench/learning.py", "rlvr-math", "--only", "3", "--runs-dir"]
    cmd += [str(tmp_path), "--set", "model=tiny-random", "train.steps=1", "data.val_size=8"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert "outcomes: " in done.stderr, done.stderr[-3000:]
    assert "| 3 | 0.000 [0.000, 0.324] | 0.000 [0.000, 0.324] | 0 / 0, 1 |" in done.stdout
    assert done.stdout.strip().endswith("learning bar: missed")
    assert done.returncode == 1  # a random model learns nothing: under the floor

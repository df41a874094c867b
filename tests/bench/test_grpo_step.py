"""bench/grpo_step.py runs end to end on the tiny model: real `roll train` and real TRL."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRL_PYTHON = REPO / ".venv-bench" / "bin" / "python"


@pytest.mark.slow
@pytest.mark.skipif(not TRL_PYTHON.exists(), reason="no .venv-bench (make bench-env)")
def test_grpo_step_bench_runs_both_sides() -> None:
    cmd = [sys.executable, "bench/grpo_step.py", "--model", "tiny-random"]
    cmd += ["--rounds", "1", "--steps", "1", "--new-tokens", "8", "--prompts", "2", "--trl-bf16"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout)
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines() if "│" in line}
    assert len(rows) == 3 and {"TRL GRPOTrainer (fp32)", "TRL GRPOTrainer (bf16)"} < set(rows)
    # roll as a user gets it: the precision auto chose on this CPU, and its engine
    assert any(re.match(r"roll \((bf16-mixed|fp32) on .*\) \(engine ", label) for label in rows)
    for line in rows.values():
        cells = [c.strip() for c in line.split("│")[2:-1]]
        step_s, samples_s = float(cells[0]), float(cells[1])
        # 2 prompts x 8 samples per step; step_s is printed to 0.1 s
        assert samples_s * step_s == pytest.approx(16, abs=0.05 * samples_s + 0.01)
        assert float(cells[2]) > 0.05  # peak PSS GiB: at least the model's weights
        assert float(cells[5]) <= 8  # tokens per sample: at most --new-tokens
        assert len(cells[6].split()) == 1  # one measured step (the warm-up step is dropped)
    ratio = re.search(r"roll / TRL samples/s: ([\d.]+)x", done.stdout)
    assert ratio and float(ratio.group(1)) > 0
    assert re.search(r"roll / TRL bf16 samples/s: ([\d.]+)x", done.stdout)
    assert "machine: " in done.stdout and "flags: " in done.stdout

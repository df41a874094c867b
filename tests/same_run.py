"""Does a resumed (or restarted) run repeat its reference? The same metrics step for step
and the same final weights, up to float32 rounding.

On one machine, with every process running the same CPU kernels, two such runs agree bit
for bit. CI's once did not, before any fault: from step 2 its two runs differed in the last
bits of the sampler's log-probs and the trainer's gradients, all samples equal, and one
run's values were bit for bit those of a run whose torch kernels are forced to AVX2
(`ATEN_CPU_CAPABILITY=avx2`) on an AVX-512 machine: vectorized kernels of another width,
another rounding. Such twins (tests/runs/test_resume.py's rlvr run, and sft's) set the
bounds below: their metrics were within 1e-6 relative (perplexity, an exponential, 8e-7)
or absolute (a KL of 3e-5 moved by 2e-9); their weights apart by 1e-4 (rlvr) and 6e-6
(sft) of the reference's last step, as one L2 norm over all tensors. Weights are compared as a whole,
not one by one: Adam divides a gradient by its own size, so where a gradient is nearly 0
last-bit noise moves that weight by a fair part of the learning rate (sft's largest: 8e-6
for a learning rate of 1e-3). A missed, repeated or wrongly restored step is a whole step;
a lost random state or data position changes the samples and rewards themselves.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

UNTIMED = ("time/", "per_s", "_mfu", "perf/peak_gflops")  # values that measure time, not the run
REL = 1e-5  # 10x the largest relative gap a rounding twin showed
ABS = 1e-6  # a metric that is a difference of near-equal values (a KL, a ratio minus 1)
STEP_SHARE = 0.01  # 100x the largest share of a step a rounding twin showed


def untimed(run: Path) -> list[dict]:
    """The run's `metrics.jsonl` rows without the values that measure time."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [
        {k: v for k, v in r.items() if k != "time" and not any(t in k for t in UNTIMED)}
        for r in rows
    ]


def assert_same_metrics(run: Path, ref: Path) -> None:
    got, want = untimed(run), untimed(ref)
    assert [r.get("step") for r in got] == [r.get("step") for r in want]
    for row, ref_row in zip(got, want, strict=True):
        assert row.keys() == ref_row.keys(), (row["step"], row.keys() ^ ref_row.keys())
        for key, value in row.items():
            expected = ref_row[key]
            if isinstance(value, float) or isinstance(expected, float):
                same = math.isclose(value, expected, rel_tol=REL, abs_tol=ABS)
            else:
                same = value == expected
            assert same, f"step {row['step']} {key}: {value!r} != {expected!r}"


def assert_same_weights(file: Path, ref_file: Path, ref_before: Path) -> None:
    """`file` and `ref_file`: two runs' final safetensors; `ref_before`: the reference's
    checkpoint one step earlier. Non-float tensors must be equal."""
    from safetensors.torch import load_file

    if file.read_bytes() == ref_file.read_bytes():
        return
    got, want, before = load_file(file), load_file(ref_file), load_file(ref_before)
    assert got.keys() == want.keys()
    gap = step = 0.0
    for name, tensor in got.items():
        expected = want[name]
        assert tensor.dtype == expected.dtype and tensor.shape == expected.shape, name
        if not tensor.is_floating_point():
            assert torch.equal(tensor, expected), name
            continue
        gap += (tensor.double() - expected.double()).square().sum().item()
        step += (expected.double() - before[name].double()).square().sum().item()
    gap, step = math.sqrt(gap), math.sqrt(step)
    assert gap <= STEP_SHARE * step, (
        f"the weights differ by {gap:.3g} (L2), {gap / step if step else math.inf:.2%} of "
        f"the reference's last step ({step:.3g}); rounding stays under {STEP_SHARE:.0%}"
    )


def assert_same_run(run: Path, ref: Path, last_step: int, weights: str = "model.safetensors"):
    """Metrics and the weights of checkpoint `step-{last_step}` (`weights`: the file in it)."""
    assert_same_metrics(run, ref)

    def file(folder: Path, step: int) -> Path:
        return folder / "checkpoints" / f"step-{step}" / weights

    assert_same_weights(file(run, last_step), file(ref, last_step), file(ref, last_step - 1))

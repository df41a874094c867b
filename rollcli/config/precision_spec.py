"""One row per numeric precision (`train.precision`, `rollout.precision`): what the code
asks of each.

Config (`algorithm.resolved_correction`; the recipe's `Literal`s, which a test ties to the
rows), the planner (`planning/role_precision.py`'s bytes per weight and refusals,
`auto_precision.py`), the strategies and the workers read a precision's facts from its
row, or compare with its constant (`precision == BF16_MIXED`), never with a string literal
(tests/config/test_name_literals.py). `auto` is a choice, not a row
(`strategy_spec.AUTO`): the planner resolves it (`planning/auto_precision.py`).

Imports nothing from roll.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

FP32: Final = "fp32"
BF16: Final = "bf16"
BF16_MIXED: Final = "bf16-mixed"
INT8: Final = "int8"
FP8: Final = "fp8"


@dataclass(frozen=True)
class PrecisionSpec:
    """A precision. `train`: a `train.precision` value; `rollout`: a `rollout.precision`
    value. `weight_bytes`: the bytes per weight a model held in it counts in the plan
    (bf16-mixed: bf16 compute over fp32 master weights, 2 for the weights the forwards
    read; int8: the fp32 weights the sync writes, its int8 copies counted apart).
    `low`: a sampler in it differs from the fp32 trainer by more than rounding (the
    off-policy correction `auto` picks `tis`). `bf16_compute`: trains in bf16 over fp32
    master weights (hf's autocast, DeepSpeed's `bf16`, FSDP2's mixed-precision policy).
    `int8`: the engine's int8 linears (`EngineSpec.int8`, on a CPU). `refusal`: why this
    build refuses it."""

    name: str
    train: bool = False
    rollout: bool = False
    weight_bytes: int = 4
    low: bool = False
    bf16_compute: bool = False
    int8: bool = False
    refusal: str | None = None


PRECISIONS: dict[str, PrecisionSpec] = {
    p.name: p
    for p in (
        PrecisionSpec(FP32, train=True, rollout=True),
        PrecisionSpec(BF16, rollout=True, weight_bytes=2, low=True),
        PrecisionSpec(BF16_MIXED, train=True, weight_bytes=2, bf16_compute=True),
        PrecisionSpec(INT8, rollout=True, low=True, int8=True),
        PrecisionSpec(
            FP8,
            rollout=True,
            weight_bytes=1,
            low=True,
            refusal=(
                "rollout.precision fp8: no engine of this build honours it yet (vLLM's fp8 "
                "would have to re-quantize after every weight sync, not built or measured); "
                "use rollout.precision: bf16"
            ),
        ),
    )
}
TRAIN_PRECISIONS = tuple(n for n, p in PRECISIONS.items() if p.train)  # fp32, bf16-mixed
ROLLOUT_PRECISIONS = tuple(n for n, p in PRECISIONS.items() if p.rollout)  # fp32 ... fp8
LOW_PRECISIONS = tuple(n for n, p in PRECISIONS.items() if p.low)  # bf16, int8, fp8

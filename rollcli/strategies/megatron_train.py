"""The `megatron` training strategy: megatron-core's GPTModel with TP/PP/CP/EP. It trains
nowhere yet: no Hugging Face -> megatron-core weight map is written, so the recipe check
refuses `train.strategy: megatron` on every machine (config/capabilities.py).

On a machine without CUDA the trainer refuses with a clear message; the parts that run on
CPU (parallel state over gloo, tensor-parallel layers, the model config) live in
megatron_parallel.py and are tested there. Unverified here: see docs/gpu.md.
"""

from __future__ import annotations

from typing import NoReturn

import torch

from rollcli.strategies.megatron_parallel import (
    MegatronUnavailableError,
    import_megatron,
    init_parallel_state,
)
from rollcli.strategies.trainer import TrainerArgs


def require_gpu() -> None:
    if not torch.cuda.is_available():
        raise MegatronUnavailableError(
            "train.strategy megatron trains on GPUs only (megatron-core's GPTModel needs CUDA); "
            "on CPU use train.strategy=deepspeed or hf"
        )


def megatron_trainer(
    model: torch.nn.Module, args: TrainerArgs, *, tp: int = 1, pp: int = 1
) -> NoReturn:
    """megatron-core training over a Hugging Face model's weights: not a `trainer.Trainer`
    yet, so it refuses to start rather than train something untested.

    The GPU path: build the parallel groups, a GPTModel from the model's config with
    megatron-core's layer spec, load the Hugging Face weights into it (a name map per
    architecture: qkv and gate/up are fused, split by tp), and step megatron's
    DistributedOptimizer with `args`' AdamW settings and schedule. The weight map is the part
    still to write and verify on a GPU.
    """
    require_gpu()
    import_megatron()
    init_parallel_state(tp=tp, pp=pp)
    raise MegatronUnavailableError(
        "train.strategy megatron: the Hugging Face -> megatron-core weight map is not "
        "written yet (see docs/gpu.md); use train.strategy=deepspeed on GPUs"
    )

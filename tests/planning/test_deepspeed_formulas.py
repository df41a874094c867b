"""Our ZeRO model-state numbers against DeepSpeed's published estimators
(`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`), written
out by hand and, when deepspeed is installed, against its functions themselves.

DeepSpeed's GPU bytes per GPU, no offload:
    ZeRO-2:  2Ψ + 18Ψ/N          (ours: 2Ψ + 14Ψ/N; DeepSpeed adds a 4-byte fp32 gradient
                                   partition)
    ZeRO-3:  4·L + 18Ψ/N          (ours: 16Ψ/N; DeepSpeed adds 2Ψ/N and the largest layer L
                                   gathered in fp32)
with optimizer offload:
    ZeRO-2:  2Ψ                   (ours: the same)
    ZeRO-3:  4·L + 2Ψ/N           (ours: 2Ψ/N)
    ZeRO-3 + parameter offload: 4·L   (ours: 0)
"""

from __future__ import annotations

import pytest

from rollcli.planning.memory import model_state_bytes

PSI = 7_000_000_000  # a 7B model, full fine-tune, Adam, bf16 weights + fp32 master states
N = 8
LAYER = 233_000_000  # the largest layer's parameters (an embedding of 152k x 1536, say)


def test_7b_zero3_on_8_gpus_by_hand() -> None:
    ours = model_state_bytes(PSI, dp=N, zero_stage=3)
    # (2 bytes bf16 weights + 2 bytes bf16 grads + 12 bytes fp32 master/m/v) / 8 GPUs
    assert ours.weights == 2 * 7_000_000_000 // 8 == 1_750_000_000
    assert ours.grads == 1_750_000_000
    assert ours.optimizer == 12 * 7_000_000_000 // 8 == 10_500_000_000
    assert ours.total == 14_000_000_000
    deepspeed_gpu = 4 * LAYER + 18 * PSI // N  # DeepSpeed's estimator, no offload
    assert deepspeed_gpu - ours.total == 2 * PSI // N + 4 * LAYER


def _deepspeed_estimates():
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    return estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs


def test_zero2_against_deepspeed() -> None:
    zero2, _ = _deepspeed_estimates()
    _, gpu = zero2(PSI, num_gpus_per_node=N, cpu_offload=False)
    ours = model_state_bytes(PSI, dp=N, zero_stage=2).total
    assert gpu == 2 * PSI + 18 * PSI // N
    assert gpu - ours == 4 * PSI // N  # the fp32 gradient partition
    _, gpu = zero2(PSI, num_gpus_per_node=N, cpu_offload=True)
    assert gpu == model_state_bytes(PSI, dp=N, zero_stage=2, offload_optimizer=True).total


def test_zero3_against_deepspeed() -> None:
    _, zero3 = _deepspeed_estimates()
    _, gpu, largest = zero3(PSI, LAYER, num_gpus_per_node=N, cpu_offload=False)
    assert largest == 4 * LAYER
    assert gpu - model_state_bytes(PSI, dp=N, zero_stage=3).total == 2 * PSI // N + largest
    _, gpu, _ = zero3(PSI, LAYER, num_gpus_per_node=N, cpu_offload=True, cpu_offload_params=False)
    ours = model_state_bytes(PSI, dp=N, zero_stage=3, offload_optimizer=True)
    assert gpu - ours.total == largest
    _, gpu, _ = zero3(PSI, LAYER, num_gpus_per_node=N, cpu_offload=True, cpu_offload_params=True)
    both = model_state_bytes(PSI, dp=N, zero_stage=3, offload_optimizer=True, offload_params=True)
    assert gpu - both.total == largest

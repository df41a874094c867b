"""megatron-core's parallel state and model config for the `megatron` strategy.

What runs on CPU (and is tested here): the process groups of tensor / pipeline / context /
expert parallelism over gloo, megatron-core's tensor-parallel linear layers, and the
`TransformerConfig` of a registry model. A `GPTModel` forward and the training step need
CUDA (megatron_train.py). megatron-core is an optional extra, imported lazily.
"""

from __future__ import annotations

from typing import Any

from rollcli.config.strategy_spec import STRATEGIES
from rollcli.models.spec import ModelSpec

INSTALL_HINT = STRATEGIES["megatron"].install_hint


class MegatronUnavailableError(RuntimeError):
    """megatron-core is missing, or the requested path needs a GPU."""


def import_megatron() -> Any:
    try:
        import megatron.core as mcore
        from megatron.core import parallel_state  # noqa: F401
    except ImportError as err:
        raise MegatronUnavailableError(
            f"train.strategy megatron needs megatron-core ({err}); install it with "
            f"`{INSTALL_HINT}` or use train.strategy=deepspeed"
        ) from None
    return mcore


def init_parallel_state(
    *, tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1, seed: int = 0
) -> Any:
    """Build megatron's model-parallel groups on the running torch.distributed world.

    The world size must be a multiple of tp·pp·cp; the rest is data parallel. On CPU the
    groups are gloo; megatron's CUDA RNG tracker is seeded only on GPU.
    """
    import torch
    import torch.distributed as dist

    import_megatron()
    from megatron.core import parallel_state

    if not dist.is_initialized():
        raise MegatronUnavailableError(
            "init_parallel_state needs torch.distributed initialised (gloo on CPU, nccl on GPU)"
        )
    world = dist.get_world_size()
    if world % (tp * pp * cp):
        raise ValueError(f"world size {world} is not a multiple of tp·pp·cp = {tp * pp * cp}")
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        context_parallel_size=cp,
        expert_model_parallel_size=ep,
    )
    if torch.cuda.is_available():
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(seed)
    return parallel_state


def transformer_config(spec: ModelSpec, *, tp: int = 1, pp: int = 1, **extra: Any) -> Any:
    """megatron-core's TransformerConfig for a llama/qwen registry model."""
    import_megatron()
    from megatron.core.transformer.transformer_config import TransformerConfig

    moe: dict[str, Any] = {}
    if spec.num_experts:
        moe = dict(
            num_moe_experts=spec.num_experts,
            moe_router_topk=spec.num_experts_per_token,
            moe_ffn_hidden_size=spec.moe_intermediate_size,
        )
    return TransformerConfig(
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        ffn_hidden_size=spec.intermediate_size,
        num_attention_heads=spec.num_attention_heads,
        num_query_groups=spec.num_kv_heads,
        kv_channels=spec.head_dim,
        normalization="RMSNorm",
        gated_linear_unit=True,
        add_bias_linear=False,
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        **moe,
        **extra,
    )

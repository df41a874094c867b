"""What of megatron-core runs on CPU, for real: parallel state over gloo, its
tensor-parallel linear layer, the TransformerConfig of a registry model; the trainer
itself refuses clearly without a GPU."""

from __future__ import annotations

import datetime

import pytest
import torch

pytest.importorskip("megatron.core")

import torch.distributed as dist  # noqa: E402

from rollcli.distributed.stores import open_store  # noqa: E402
from rollcli.models.registry import get_model_spec  # noqa: E402
from rollcli.strategies.megatron_parallel import (  # noqa: E402
    MegatronUnavailableError,
    init_parallel_state,
    transformer_config,
)


@pytest.fixture(scope="module")
def gloo_world():
    if not dist.is_initialized():
        store = open_store("127.0.0.1", 1, datetime.timedelta(minutes=5))
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield
    from megatron.core import parallel_state

    parallel_state.destroy_model_parallel()


def test_parallel_state_and_tp_linear_on_gloo(gloo_world) -> None:
    ps = init_parallel_state(tp=1, pp=1)
    assert ps.get_tensor_model_parallel_world_size() == 1
    assert ps.get_data_parallel_world_size() == 1
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.tensor_parallel import ColumnParallelLinear

    torch.manual_seed(0)
    cfg = ModelParallelConfig(use_cpu_initialization=True, perform_initialization=True)
    layer = ColumnParallelLinear(
        8, 6, config=cfg, init_method=torch.nn.init.normal_, bias=True, gather_output=True
    )
    x = torch.randn(3, 8)
    y, _ = layer(x)
    torch.testing.assert_close(y, x @ layer.weight.T + layer.bias)


def test_transformer_config_of_a_registry_model() -> None:
    spec = get_model_spec("qwen3-30b-a3b")
    cfg = transformer_config(spec, tp=1, pp=1)
    assert (cfg.num_layers, cfg.hidden_size, cfg.num_query_groups) == (48, 2048, 4)
    assert cfg.num_moe_experts == 128 and cfg.moe_router_topk == 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for CPU machines")
def test_trainer_refuses_on_cpu() -> None:
    from rollcli.strategies.megatron_train import megatron_trainer
    from rollcli.strategies.trainer import TrainerArgs

    with pytest.raises(MegatronUnavailableError, match="GPUs only"):
        megatron_trainer(torch.nn.Linear(2, 2), TrainerArgs(lr=1e-5))

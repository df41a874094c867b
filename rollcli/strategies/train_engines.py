"""Which training strategy a train worker runs: `hf` (plain torch), `fsdp2` (torch's
`fully_shard`), `deepspeed` or `megatron`.

`TrainStrategy` holds the flat arguments the recipe's `train.strategy` and
`devices.actor_train.*` keys give a worker; the pipeline builds it from the recipe and
passes it to `build_clusters`. `make_trainer` builds the trainer, importing an optional
backend only when it is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TRAIN_STRATEGIES = ("hf", "fsdp2", "deepspeed", "megatron")


@dataclass(frozen=True)
class TrainStrategy:
    name: str = "hf"
    zero_stage: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    tp: int = 1
    pp: int = 1

    def worker_kwargs(self) -> dict[str, Any]:
        return {"strategy": self.name, "strategy_options": self.options()}

    def options(self) -> dict[str, Any]:
        if self.name == "deepspeed":
            return {
                "zero_stage": self.zero_stage,
                "offload_optimizer": self.offload_optimizer,
                "offload_params": self.offload_params,
            }
        if self.name == "fsdp2":  # always fully sharded; its CPU offload moves every state
            return {"offload_params": self.offload_params}
        if self.name == "megatron":
            return {"tp": self.tp, "pp": self.pp}
        return {}


def make_trainer(
    strategy: str,
    model: Any,
    *,
    options: dict[str, Any],
    rank: int = 0,
    world_size: int = 1,
    **train_args: Any,
) -> Any:
    """The trainer of `strategy` over `model` (lr, betas, ... in `train_args`). With
    `world_size > 1` this process must already be rank `rank` of the default process group
    (see distributed/data_parallel.py)."""
    if strategy == "hf":
        from rollcli.strategies.hf_train import HFTrainer

        return HFTrainer(model, world_size=world_size, **train_args)
    if strategy == "fsdp2":
        from rollcli.strategies.fsdp2_train import FSDP2Trainer

        return FSDP2Trainer(model, rank=rank, world_size=world_size, **train_args, **options)
    if strategy == "deepspeed":
        from rollcli.strategies.deepspeed_train import DeepSpeedTrainer

        return DeepSpeedTrainer(model, rank=rank, world_size=world_size, **train_args, **options)
    if strategy == "megatron":
        from rollcli.strategies.megatron_train import MegatronTrainer

        return MegatronTrainer(model, **train_args, **options)
    raise ValueError(f"unknown training strategy {strategy!r}; choose one of {TRAIN_STRATEGIES}")

"""Which training strategy a train worker runs: `hf` (plain torch), `fsdp2` (torch's
`fully_shard`), `deepspeed` or `megatron`.

`TrainStrategy` holds the flat arguments the recipe's `train.strategy` and
`devices.actor_train.*` keys give a worker; the pipeline builds it from the recipe and
passes it to `build_clusters`. `make_trainer` builds the trainer (a `trainer.Trainer`) from
it, the recipe's `TrainerArgs` and the plan's precision, importing an optional backend only
when it is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from rollcli.strategies.trainer import Trainer, TrainerArgs

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
    strategy: TrainStrategy,
    model: torch.nn.Module,
    args: TrainerArgs,
    *,
    rank: int = 0,
    world_size: int = 1,
    precision: str = "fp32",
) -> Trainer:
    """The trainer of `strategy` over `model`, its AdamW and schedule from `args`. With
    `world_size > 1` this process must already be rank `rank` of the default process group
    (see distributed/data_parallel.py).

    `precision` (the plan's `fp32` or `bf16-mixed`) reaches the strategies that must be told
    of it: DeepSpeed's `bf16` switch, FSDP2's mixed-precision policy. hf runs autocast in the
    worker; megatron has no mixed precision here yet."""
    bf16 = precision == "bf16-mixed"
    if strategy.name == "hf":
        from rollcli.strategies.hf_train import HFTrainer

        return HFTrainer(model, args, world_size=world_size)
    if strategy.name == "fsdp2":
        from rollcli.strategies.fsdp2_train import FSDP2Trainer

        return FSDP2Trainer(
            model,
            args,
            rank=rank,
            world_size=world_size,
            bf16=bf16,
            offload_params=strategy.offload_params,
        )
    if strategy.name == "deepspeed":
        from rollcli.strategies.deepspeed_train import DeepSpeedTrainer

        return DeepSpeedTrainer(
            model,
            args,
            zero_stage=strategy.zero_stage,
            offload_optimizer=strategy.offload_optimizer,
            offload_params=strategy.offload_params,
            rank=rank,
            world_size=world_size,
            bf16=bf16,
        )
    if strategy.name == "megatron":
        if precision != "fp32":
            raise ValueError(f"train.strategy megatron runs fp32 only here, not {precision}")
        from rollcli.strategies.megatron_train import megatron_trainer

        megatron_trainer(model, args, tp=strategy.tp, pp=strategy.pp)
    raise ValueError(
        f"unknown training strategy {strategy.name!r}; choose one of {TRAIN_STRATEGIES}"
    )

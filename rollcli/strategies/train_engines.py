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

from rollcli.config.precision_spec import BF16_MIXED, FP32
from rollcli.config.strategy_spec import STRATEGIES, STRATEGY_NAMES

if TYPE_CHECKING:
    import torch

    from rollcli.strategies.trainer import Trainer, TrainerArgs

TRAIN_STRATEGIES = STRATEGY_NAMES  # hf, fsdp2, deepspeed, megatron (config/strategy_spec.py)


@dataclass(frozen=True)
class TrainStrategy:
    name: str = "hf"
    zero_stage: int = 0
    offload_optimizer: bool = False
    offload_params: bool = False
    tp: int = 1
    pp: int = 1

    def options(self) -> dict[str, Any]:
        """The fields the strategy's trainer takes (its row's `options`: deepspeed's ZeRO
        stage and offloads, fsdp2's offload, which moves every state, megatron's tp and pp;
        none for hf)."""
        row = STRATEGIES.get(self.name)
        return {key: getattr(self, key) for key in (row.options if row else ())}


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

    The row's `trainer` builds it (imported only when chosen), given the row's
    `trainer_takes` of this rank's place and `bf16` (the plan's `precision` is
    `bf16-mixed`: DeepSpeed's `bf16` switch, FSDP2's mixed-precision policy; hf runs
    autocast in the worker), and the strategy's `options`; megatron runs fp32 only here."""
    row = STRATEGIES.get(strategy.name)
    if row is None:
        raise ValueError(
            f"unknown training strategy {strategy.name!r}; choose one of {TRAIN_STRATEGIES}"
        )
    if row.fp32_only and precision != FP32:
        raise ValueError(f"train.strategy {row.name} runs fp32 only here, not {precision}")
    place = {"rank": rank, "world_size": world_size, "bf16": precision == BF16_MIXED}
    kwargs = {**{k: place[k] for k in row.trainer_takes}, **strategy.options()}
    # the row's `trainer`, imported only when chosen; written as calls (not `importlib` of
    # the row's string) so that a reader, and `farm-studio walk`, follow `train.lr` from
    # the recipe to AdamW (tests/config/test_strategy_spec.py ties these to the rows)
    if row.fully_sharded:
        from rollcli.strategies.fsdp2_train import FSDP2Trainer

        return FSDP2Trainer(model, args, **kwargs)
    if row.zero:
        from rollcli.strategies.deepspeed_train import DeepSpeedTrainer

        return DeepSpeedTrainer(model, args, **kwargs)
    if row.parallel:
        from rollcli.strategies.megatron_train import megatron_trainer

        return megatron_trainer(model, args, **kwargs)
    from rollcli.strategies.hf_train import HFTrainer

    return HFTrainer(model, args, **kwargs)

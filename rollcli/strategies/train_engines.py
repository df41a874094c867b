"""Which training strategy a train worker runs: `hf` (plain torch), `deepspeed` or `megatron`.

`TrainStrategy` holds the flat arguments the recipe's `train.strategy` and
`devices.actor_train.*` keys give a worker; `make_trainer` builds the trainer, importing
an optional backend only when it is chosen.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

TRAIN_STRATEGIES = ("hf", "deepspeed", "megatron")


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
        if self.name == "megatron":
            return {"tp": self.tp, "pp": self.pp}
        return {}


def backend_available(module: str) -> bool:
    """True when `module` can be found (found, not imported)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def make_trainer(strategy: str, model: Any, *, options: dict[str, Any], **train_args: Any) -> Any:
    """The trainer of `strategy` over `model` (lr, betas, ... in `train_args`)."""
    if strategy == "hf":
        from rollcli.strategies.hf_train import HFTrainer

        return HFTrainer(model, **train_args)
    if strategy == "deepspeed":
        from rollcli.strategies.deepspeed_train import DeepSpeedTrainer

        return DeepSpeedTrainer(model, **train_args, **options)
    if strategy == "megatron":
        from rollcli.strategies.megatron_train import MegatronTrainer

        return MegatronTrainer(model, **train_args, **options)
    raise ValueError(f"unknown training strategy {strategy!r}; choose one of {TRAIN_STRATEGIES}")


# The recipe's strategy, set by `roll train` (runs/launch.py) for the run it drives and read
# by pipelines/workers_setup.py when it builds actor_train. A bridge until the rlvr pipeline
# passes `strategy=` to create_clusters itself; outside a run it is plain `hf`.
_ACTIVE: contextvars.ContextVar[TrainStrategy | None] = contextvars.ContextVar(
    "roll_train_strategy", default=None
)


def active_train_strategy() -> TrainStrategy:
    return _ACTIVE.get() or TrainStrategy()


@contextlib.contextmanager
def train_strategy_scope(strategy: TrainStrategy) -> Iterator[None]:
    token = _ACTIVE.set(strategy)
    try:
        yield
    finally:
        _ACTIVE.reset(token)

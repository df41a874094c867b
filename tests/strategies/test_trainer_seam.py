"""The trainer seam: the recipe's `train.*` keys reach AdamW through one frozen `TrainerArgs`
and `make_trainer`, and every strategy runs the same update loop."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rollcli.config.loader import load_recipe
from rollcli.runtime.worker_table import trainer_args
from rollcli.strategies.deepspeed_train import DeepSpeedTrainer
from rollcli.strategies.fsdp2_train import FSDP2Trainer
from rollcli.strategies.hf_train import HFTrainer
from rollcli.strategies.train_engines import TrainStrategy, make_trainer
from rollcli.strategies.update_loop import UpdateLoop


def test_the_recipes_train_keys_reach_adamw() -> None:
    cfg, _ = load_recipe(
        "rlvr-math",
        ["train.lr=3e-6", "train.weight_decay=0.01", "train.grad_clip=0.5", "train.warmup_steps=4"],
    )
    args = trainer_args(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.lr = 1.0  # type: ignore[misc]
    trainer = make_trainer(TrainStrategy("hf"), torch.nn.Linear(3, 1), args)
    assert isinstance(trainer, HFTrainer)
    adamw = trainer.optimizer
    assert isinstance(adamw, torch.optim.AdamW)
    assert adamw.defaults["lr"] == 3e-6
    assert adamw.defaults["betas"] == cfg.train.betas
    assert adamw.defaults["weight_decay"] == 0.01
    assert trainer.grad_clip == 0.5
    # the first optimizer step runs at 1/4 of the rate: the warm-up's first of 4 steps
    assert adamw.param_groups[0]["lr"] == pytest.approx(3e-6 / 4)


def test_an_unknown_strategy_is_refused_by_name() -> None:
    args = trainer_args(load_recipe("rlvr-math")[0])
    with pytest.raises(ValueError, match="unknown training strategy 'jax'; choose one of"):
        make_trainer(TrainStrategy("jax"), torch.nn.Linear(3, 1), args)


@pytest.mark.parametrize("trainer", [HFTrainer, FSDP2Trainer, DeepSpeedTrainer])
def test_every_strategy_runs_the_one_update_loop(trainer: type) -> None:
    """The strategies supply hooks; none writes an update loop of its own."""
    assert trainer.update is UpdateLoop.update
    for hook in ("_train_mode", "_start_step", "_backward", "_finish_step"):
        assert getattr(trainer, hook) is not getattr(UpdateLoop, hook), hook

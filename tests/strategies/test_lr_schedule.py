"""`train.lr_schedule`: the rate each training step runs at, by hand, through a real trainer,
across a checkpoint (the count of updates is part of the scheduler's state), and the keys."""

from __future__ import annotations

import math

import pytest
import torch

from rollcli.config.errors import ConfigError
from rollcli.config.loader import load_recipe
from rollcli.data.batch import Batch
from rollcli.runtime.worker_table import trainer_args
from rollcli.strategies.hf_train import HFTrainer
from rollcli.strategies.lr_schedule import LrFactor
from rollcli.strategies.trainer import TrainerArgs

# warm-up over 2 optimizer steps, then a linear decay over the 4 training steps
SCHEDULE = TrainerArgs(lr=0.1, warmup_steps=2, total_steps=4, lr_schedule="linear")


def test_decay_by_hand() -> None:
    lin = LrFactor(total_steps=4, schedule="linear")
    assert [lin.decay(u) for u in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]
    cos = LrFactor(total_steps=4, schedule="cosine", decay_steps=2, min_lr_ratio=0.1)
    want = [1.0, 1.0, 1.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2)), 0.1]
    assert [cos.decay(u) for u in range(5)] == pytest.approx(want)
    assert LrFactor(total_steps=3).decay(2) == 1.0  # constant
    warm = LrFactor(warmup_steps=4, total_steps=2, schedule="linear")
    assert [warm(s) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]  # update 0: decay 1


def _trainer(args: TrainerArgs) -> HFTrainer:
    torch.manual_seed(0)
    return HFTrainer(torch.nn.Linear(3, 1), args)


def _update(trainer: HFTrainer) -> float:
    x = torch.randn(4, 3)

    def loss(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        return trainer.model(micro["x"]).pow(2).mean(), {}

    # two mini-batches: two optimizer steps in one training step
    out = trainer.update(
        Batch({"x": x}),
        loss_fn=loss,
        mini_batch_size=2,
        micro_batch_size=2,
        micro_batches=lambda b, n: [(torch.arange(len(b)), b)],
    )
    return out["lr"]


def test_a_trainer_runs_each_training_step_at_its_rate_and_resumes_the_curve() -> None:
    trainer = _trainer(SCHEDULE)
    # step 0: optimizer steps at warm-up 1/2 then 2/2 of decay 1; the metric reports the
    # last rate used; then decay 0.75, 0.5, 0.25 with the warm-up done
    assert [_update(trainer) for _ in range(2)] == pytest.approx([0.1, 0.075])
    state = trainer.state_dict()
    resumed = _trainer(SCHEDULE)
    resumed.load_state_dict(state)
    assert [_update(resumed) for _ in range(2)] == pytest.approx([0.05, 0.025])
    assert resumed.optimizer.param_groups[0]["lr"] == pytest.approx(0.0)  # after the last


def test_the_recipe_keys_reach_the_trainer() -> None:
    cfg, _ = load_recipe(
        "rlvr-math",
        ["train.lr_schedule=cosine", "train.lr_decay_steps=10", "train.min_lr_ratio=0.1"],
    )
    factor = trainer_args(cfg).lr_factor()
    assert (factor.schedule, factor.decay_steps, factor.min_lr_ratio) == ("cosine", 10, 0.1)
    assert factor.total_steps == cfg.train.steps
    shipped = trainer_args(load_recipe("rlvr-math")[0]).lr_factor()  # linear, last 10 steps
    assert (shipped.schedule, shipped.decay_steps) == ("linear", 10)
    constant = trainer_args(load_recipe("rlvr-math", ["train.lr_schedule=constant"])[0])
    assert constant.lr_factor().decay(10**6) == 1.0
    with pytest.raises(ConfigError, match="lr_schedule"):
        load_recipe("rlvr-math", ["train.lr_schedule=step"])

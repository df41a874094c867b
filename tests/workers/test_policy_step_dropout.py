"""actor_train's update runs with dropout off (eval-mode semantics, gradients on): the
policy gradient is that of the policy that computed the old log-probs, so with dropout in
the model's config two identical steps give the same loss, with or without gradient
checkpointing."""

from __future__ import annotations

import json
import shutil

import pytest
from policy_step_reference import policy_batch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs


@pytest.fixture(scope="module")
def dropout_model(tiny_model, tmp_path_factory):
    """tiny-random with attention dropout 0.5."""
    folder = tmp_path_factory.mktemp("dropout") / "model"
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "attention_dropout": 0.5}))
    return folder


@pytest.mark.parametrize("checkpointing", [False, True])
def test_two_identical_steps_give_the_same_loss(
    dropout_model, captured_grads, checkpointing: bool
) -> None:
    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(dropout_model),
            # the weights stay: only dropout could change the loss
            trainer=TrainerArgs(lr=0.0, grad_clip=None),
            num_threads=1,
            gradient_checkpointing=checkpointing,
        )
    )
    assert worker.model.model.layers[0].self_attn.attention_dropout == 0.5
    pad = worker.tokenizer.pad_token_id
    batch = policy_batch([[1, 2, 3], [4, 5]], [[6, 7, 8, 9], [10, 11]], [1.0, -1.0], pad)
    args = PolicyUpdateArgs(micro_batch_size=2)
    first = worker.train_step(batch, args)
    second = worker.train_step(batch, args)
    assert first["loss"] == second["loss"]
    assert first["entropy"] == second["entropy"]
    # the decoder layers keep their training flag: gradient checkpointing still runs
    layer = worker.model.model.layers[0]
    assert layer.training is checkpointing and not layer.self_attn.training
    # and the steps had gradients (an eval-mode forward still builds the graph)
    assert len(captured_grads) == 2
    assert any(float(g.abs().sum()) > 0 for g in captured_grads[0])

"""The off-policy correction in the actor's update (`algorithm.off_policy`): its weights
against the sampler's log-probs, the mismatch metrics, what the weights do to the loss, and
that without a correction the update is the one from before."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from policy_step_reference import policy_batch

from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.objective import off_policy_weights
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs


def _micro(behaviour: list[list[float]]) -> Batch:
    return Batch({"behaviour_logprobs": torch.tensor(behaviour)}, {})


def test_weights_and_metrics_by_hand() -> None:
    old = torch.log(torch.tensor([[0.5, 0.25, 0.1]]))
    behaviour = torch.log(torch.tensor([[0.25, 0.5, 0.1]])).tolist()
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is padding
    args = PolicyUpdateArgs(correction="tis", correction_cap=1.5)
    weights, metrics = off_policy_weights(args, old, _micro(behaviour), mask)
    # ratios 2 and 0.5; 2 is capped at 1.5; padding weighs 0
    assert weights.tolist()[0] == pytest.approx([1.5, 0.5, 0.0])
    assert metrics["mismatch_ratio_mean"] == pytest.approx((2 + 0.5) / 2)
    assert metrics["off_policy_corrected_frac"] == pytest.approx(0.5)
    assert metrics["mismatch_ratio_max"] == pytest.approx(2.0)


def test_no_weights_without_a_correction_metrics_whenever_the_sampler_sent_logprobs() -> None:
    old, mask = torch.zeros(1, 2), torch.ones(1, 2)
    weights, metrics = off_policy_weights(PolicyUpdateArgs(), old, _micro([[0.0, 0.0]]), mask)
    assert weights is None and metrics["mismatch_kl"] == 0.0
    assert "off_policy_weight_mean" not in metrics
    tis = PolicyUpdateArgs(correction="tis")
    assert off_policy_weights(tis, old, Batch({}, {}), mask) == (None, {})


def test_no_correction_updates_the_policy_bit_for_bit_as_before(tiny_model) -> None:
    """`correction: none` with the sampler's log-probs in the batch (now measured) trains
    exactly as a batch without them, which is the loss before the corrections existed."""
    prompts, responses = [[1, 2, 3], [4, 5]], [[10, 11], [12, 13, 14]]
    states, losses = [], []
    for with_behaviour in (False, True):
        worker = ActorTrainWorker(
            TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-2, grad_clip=None), seed=0)
        )
        batch = policy_batch(prompts, responses, [1.0, -1.0], worker.tokenizer.pad_token_id)
        if with_behaviour:
            batch.set("behaviour_logprobs", batch["old_logprobs"] - 0.3)
        out = worker.train_step(batch, PolicyUpdateArgs(epochs=2, micro_batch_size=1))
        assert ("mismatch_kl" in out) == with_behaviour
        losses.append(out["pg_loss"])
        states.append({k: v.clone() for k, v in worker.model.state_dict().items()})
    assert losses[0] == losses[1]
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_the_weights_scale_each_tokens_policy_gradient_loss() -> None:
    logprobs = torch.log(torch.tensor([[0.5, 0.25]])).requires_grad_()
    adv, mask = torch.tensor([[1.0, 1.0]]), torch.ones(1, 2)
    w = torch.tensor([[1.5, 0.5]])
    inputs = PolicyLossInputs(logprobs, adv, mask, old_logprobs=logprobs.detach())
    plain, _ = compute_policy_loss("ppo", inputs)
    weighted, _ = compute_policy_loss("ppo", dataclasses.replace(inputs, is_weights=w))
    # on-policy ratio 1: per-token loss is -A = -1, token-mean: plain -1, weighted -(1.5+0.5)/2
    assert float(plain.detach()) == pytest.approx(-1.0)
    assert float(weighted.detach()) == pytest.approx(-1.0)
    grad_w = torch.autograd.grad(weighted, logprobs)[0]
    assert grad_w.tolist()[0] == pytest.approx([-1.5 / 2, -0.5 / 2])
    assert math.isclose(float(grad_w.sum()), -1.0)

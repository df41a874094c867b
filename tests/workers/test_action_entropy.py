"""An `action_mask` (agentic: each reply's first action token) moves the entropy bonus onto
those tokens: actor_train's loss and gradients equal one full-batch computation whose bonus
covers the marked tokens only, for any micro-batch split, and `action_entropy` is the
forward's entropy there."""

from __future__ import annotations

import pytest
import torch
from policy_step_reference import policy_batch

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.strategies.hf_model import load_causal_lm, response_logprobs
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4]]
RESPONSES = [[10, 11, 12], [13, 14], [14, 15, 16, 17, 18, 19], [20, 21]]
ACTIONS = [[0], [1], [0, 3], []]  # the marked response positions of each row (row 3: none)
COEF = 50.0  # the tiny random model's entropy is near log V: a large weight shows its gradient


def _batch(pad_id: int):
    batch = policy_batch(PROMPTS, RESPONSES, [1.0, -1.0, 0.5, -0.5], pad_id)
    batch.tensors.pop("ref_logprobs")
    action = torch.zeros_like(batch["response_mask"])
    for row, positions in enumerate(ACTIONS):
        action[row, positions] = 1.0
    batch.set("action_mask", action)
    return batch


def test_entropy_bonus_and_metric_cover_the_action_tokens_only(tiny_model, captured_grads) -> None:
    torch.manual_seed(0)
    reference = load_causal_lm(str(tiny_model), train=True)
    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model), trainer=TrainerArgs(lr=0.0, grad_clip=None), num_threads=1, seed=0
        )
    )
    batch = _batch(worker.tokenizer.pad_token_id)
    mask, action = batch["response_mask"], batch["action_mask"]

    def reference_step(entropy_mask: torch.Tensor):
        """Loss, entropy bonus term and gradients of one forward/backward over the batch."""
        reference.zero_grad(set_to_none=True)
        logprobs, entropy = response_logprobs(reference, model_inputs(batch), with_entropy=True)
        pg, _ = compute_policy_loss("ppo", PolicyLossInputs(
            logprobs=logprobs, advantages=batch["advantages"], mask=mask,
            old_logprobs=batch["old_logprobs"], agg="token-mean",
        ))  # fmt: skip
        bonus = aggregate_loss(entropy, entropy_mask, "token-mean")
        loss = pg - COEF * bonus
        loss.backward()
        grads = {n: p.grad.clone() for n, p in reference.named_parameters()}
        return float(loss.detach()), float(bonus.detach()), grads

    loss, on_actions, expected = reference_step(action)
    _, _, all_tokens = reference_step(mask)  # the bonus over every model token
    assert any(
        not torch.allclose(all_tokens[n], g, atol=1e-5, rtol=1e-4) for n, g in expected.items()
    )

    for micro in (1, 4):
        captured_grads.clear()
        args = PolicyUpdateArgs(loss_agg="token-mean", micro_batch_size=micro, entropy_coef=COEF)
        metrics = worker.train_step(batch, args)
        assert metrics["loss"] == pytest.approx(loss, rel=1e-6)
        got = dict(
            zip([n for n, _ in reference.named_parameters()], captured_grads[0], strict=True)
        )
        for name, grad in expected.items():
            torch.testing.assert_close(got[name], grad, atol=1e-5, rtol=1e-4, msg=name)
        if micro == 4:  # one micro-batch: the metric is the forward's mean on marked tokens
            assert metrics["action_entropy"] == pytest.approx(on_actions, abs=1e-5)

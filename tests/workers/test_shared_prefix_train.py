"""The policy update on the shared-prefix layout is the plain one: for hf and DeepSpeed, the
loss and every parameter gradient of actor_train's step with `shared_prefix` equal one
plain forward/backward over the whole untrimmed batch (prompts of different lengths,
groups of one, padding, an empty response; micro-batches that split a group or hold
several)."""

from __future__ import annotations

import pytest
import torch
from policy_step_reference import ENTROPY, KL, KL_ESTIMATOR, full_batch_step, policy_batch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.train_engines import TrainStrategy
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

# groups of 3, 1 and 2 with prompts of 4, 2 and 3 tokens (a group's rows not all adjacent)
PROMPTS = [[1, 2, 3, 4], [1, 2, 3, 4], [5, 6], [7, 8, 9], [1, 2, 3, 4], [7, 8, 9]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [], [23, 24, 25, 26]]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
# (micro_batch_size, micro_batch_tokens): a row each, groups split over micro-batches,
# everything at once, a packed-token budget
SPLITS = [(1, None), (2, None), (6, None), (6, 12)]


def _batch() -> Batch:
    return policy_batch(PROMPTS, RESPONSES, ADVANTAGES, pad_id=0)


@pytest.fixture(scope="module")
def reference(tiny_model):
    return load_causal_lm(str(tiny_model), train=True)


def _check(worker, reference, captured_grads, mode: str) -> None:
    batch = _batch()
    names = [n for n, _ in reference.named_parameters()]
    for micro, tokens in SPLITS:
        args = PolicyUpdateArgs(
            loss_agg=mode,
            micro_batch_size=micro,
            micro_batch_tokens=tokens,
            entropy_coef=ENTROPY,
            kl_loss_coef=KL,
            kl_estimator=KL_ESTIMATOR,
            shared_prefix=True,
        )
        loss, grads = full_batch_step(
            reference, batch, args, norm_len=batch["response_mask"].shape[1]
        )
        captured_grads.clear()
        metrics = worker.train_step(batch, args)
        assert metrics["loss"] == pytest.approx(loss, rel=1e-5), (mode, micro, tokens)
        (got,) = captured_grads
        assert len(got) == len(names)
        for name, g in zip(names, got, strict=True):
            assert g.abs().max() > 0, name  # every weight takes part
            torch.testing.assert_close(
                g, grads[name], rtol=1e-4, atol=1e-6, msg=f"{mode} {micro} {tokens}: {name}"
            )


def _worker(tiny_model, strategy: str = "hf", **options) -> ActorTrainWorker:
    # lr 0: the weights never move, so one worker serves every split
    return ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            trainer=TrainerArgs(lr=0.0, grad_clip=None),
            num_threads=1,
            strategy=TrainStrategy(strategy, **options),
        )
    )


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_hf_shared_prefix_step_is_the_plain_step(tiny_model, reference, captured_grads, mode):
    _check(_worker(tiny_model), reference, captured_grads, mode)


def test_deepspeed_shared_prefix_step_is_the_plain_step(tiny_model, reference, captured_grads):
    pytest.importorskip("deepspeed")
    worker = _worker(tiny_model, "deepspeed", zero_stage=0)
    _check(worker, reference, captured_grads, "seq-mean-token-sum-norm")


@pytest.mark.parametrize("shared_prefix", [False, True])
def test_a_micro_batch_of_empty_responses_backpropagates(tiny_model, shared_prefix):
    """A micro-batch whose rows have no response token has a loss of 0 that still
    backpropagates (before, the hf head's empty log-probs left the graph, and
    `loss.backward()` raised)."""
    batch = _batch().select([4, 0])  # row 4's response is empty; one row per micro-batch
    args = PolicyUpdateArgs(micro_batch_size=1, shared_prefix=shared_prefix)
    metrics = _worker(tiny_model).train_step(batch, args)
    assert metrics["grad_norm"] > 0


def test_critic_shared_prefix_values_and_step_are_the_plain_ones(tiny_model, captured_grads):
    """The critic's values on every response token, and the gradients of its token-mean
    value loss, equal one plain full-batch forward/backward."""
    from rollcli.algorithms.value_loss import value_loss
    from rollcli.workers.critic import CriticArgs, CriticWorker, _values

    critic = CriticWorker(CriticArgs(str(tiny_model), lr=0.0, grad_clip=None, num_threads=1))
    with torch.no_grad():  # a value head that is not all zeros, so every weight has a gradient
        critic.model.score.weight.normal_(generator=torch.Generator().manual_seed(0))
    batch = _batch()
    mask = batch["response_mask"]
    batch.set("values", torch.zeros(mask.shape))
    batch.set("returns", torch.tensor(ADVANTAGES)[:, None] * mask)
    critic.model.zero_grad(set_to_none=True)
    values = _values(critic.model, model_inputs(batch))
    loss, _ = value_loss(values, batch["values"], batch["returns"], mask, clip=0.2)
    loss.backward()
    expected = [p.grad.clone() for p in critic.model.parameters()]
    for micro in (1, 2, 6):
        shared = critic.compute_values(batch, micro, shared_prefix=True)
        torch.testing.assert_close(shared, values.detach() * mask, rtol=1e-5, atol=1e-5)
        captured_grads.clear()
        critic.train_step(
            batch,
            value_clip=0.2,
            micro_batch_size=micro,
            mini_batch_size=None,
            shared_prefix=True,
        )
        (got,) = captured_grads
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            scale = float(e.abs().max())
            torch.testing.assert_close(
                g, e, rtol=1e-4, atol=1e-6 * scale, msg=f"micro {micro}: param {i}"
            )


@pytest.mark.slow  # ZeRO-3 on the CPU: 2-7 minutes on the shared machine
def test_deepspeed_zero3_shared_prefix_step_is_the_plain_step(tiny_model):
    """Under ZeRO-3 (parameters gathered layer by layer inside the forward) the shared-prefix
    step's loss and gradient norm are the plain step's. (ZeRO-3's norm itself differs from
    hf's by ~1e-3 relative on either layout, so the plain step here is ZeRO-3's too.)"""
    pytest.importorskip("deepspeed")
    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            # the weights never move (one worker serves both steps); a norm is computed,
            # nothing is clipped
            trainer=TrainerArgs(lr=0.0, grad_clip=1e9),
            num_threads=1,
            strategy=TrainStrategy("deepspeed", zero_stage=3),
        )
    )
    steps = {}
    for shared_prefix in (False, True):
        args = PolicyUpdateArgs(
            micro_batch_size=2, entropy_coef=ENTROPY, kl_loss_coef=KL, shared_prefix=shared_prefix
        )
        steps[shared_prefix] = worker.train_step(_batch(), args)
    assert steps[True]["loss"] == pytest.approx(steps[False]["loss"], rel=1e-5)
    assert steps[True]["grad_norm"] == pytest.approx(steps[False]["grad_norm"], rel=1e-5)

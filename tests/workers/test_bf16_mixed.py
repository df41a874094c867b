"""`train.precision: bf16-mixed` on the CPU, as the hf strategy trains it: the update's loss
and gradients agree with the exact fp32 full-batch computation within bf16's rounding (loss
within 2%, the gradient vector within 5% of its norm, cosine above 0.99: bf16 keeps 8 bits
of mantissa, ~0.4% per operand), the master weights and Adam's states stay fp32, and each
optimizer step's forwards compute with the weights as they are then (autocast's casts are
kept for one step's micro-batches only, `precision.kept_casts`)."""

from __future__ import annotations

import pytest
import torch
from policy_step_reference import ENTROPY, KL, KL_ESTIMATOR, full_batch_step, policy_batch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4], [2, 9, 4, 8, 1], [6]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [22], [23, 24, 25, 26]]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]


def _worker(tiny_model, lr: float = 0.0) -> ActorTrainWorker:
    return ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            trainer=TrainerArgs(lr=lr, grad_clip=None),
            num_threads=1,
            seed=0,
            precision="bf16-mixed",
        )
    )


@pytest.mark.parametrize("micro_batch_size", [6, 2])
def test_a_bf16_mixed_update_matches_fp32_within_rounding(
    tiny_model, captured_grads, micro_batch_size
) -> None:
    torch.manual_seed(0)
    reference = load_causal_lm(str(tiny_model), train=True)
    worker = _worker(tiny_model)
    batch = policy_batch(PROMPTS, RESPONSES, ADVANTAGES, worker.tokenizer.pad_token_id)
    args = PolicyUpdateArgs(
        loss_agg="seq-mean-token-mean",
        micro_batch_size=micro_batch_size,
        entropy_coef=ENTROPY,
        kl_loss_coef=KL,
        kl_estimator=KL_ESTIMATOR,
    )
    width = batch["response_mask"].shape[1]
    loss, grads = full_batch_step(reference, batch, args, norm_len=width)
    metrics = worker.train_step(batch, args)
    assert metrics["loss"] == pytest.approx(loss, rel=0.02)
    (got,) = captured_grads
    flat = torch.cat([g.flatten() for g in got])
    expected = torch.cat([g.flatten() for g in grads.values()])
    assert flat.dtype == torch.float32  # gradients reach the fp32 master weights in fp32
    assert (flat - expected).norm() / expected.norm() < 0.05
    assert torch.nn.functional.cosine_similarity(flat, expected, dim=0) > 0.99
    # the update computed in bf16 (not a silent fp32 run): not equal to fp32 bit for bit
    assert not torch.equal(flat, expected)


def test_master_weights_and_adam_states_stay_fp32(tiny_model) -> None:
    worker = _worker(tiny_model, lr=1e-3)
    batch = policy_batch(PROMPTS, RESPONSES, ADVANTAGES, worker.tokenizer.pad_token_id)
    before = {n: p.detach().clone() for n, p in worker.model.named_parameters()}
    worker.train_step(batch, PolicyUpdateArgs(micro_batch_size=2))
    for name, p in worker.model.named_parameters():
        assert p.dtype == torch.float32, name
        if p.requires_grad and p.grad is not None:
            # an fp32 step: a change smaller than bf16 could hold (~0.4% of the weight)
            assert not torch.equal(p.detach(), before[name]), name
    states = worker.trainer.optimizer.state.values()
    assert states and all(s["exp_avg"].dtype == torch.float32 for s in states)


def test_each_optimizer_step_computes_with_the_weights_as_they_are(tiny_model) -> None:
    """Two mini-batches, two optimizer steps: a linear's output in the second step is its
    input times the weight after the first step (cast to bf16 now), not a cast kept from
    the first step."""
    worker = _worker(tiny_model, lr=1e-2)
    batch = policy_batch(PROMPTS, RESPONSES, ADVANTAGES, worker.tokenizer.pad_token_id)
    layer = worker.model.get_decoder().layers[0].mlp.down_proj
    seen: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def hook(module, inputs, output) -> None:  # noqa: ANN001
        seen.append((inputs[0].detach(), module.weight.detach().clone(), output.detach()))

    handle = layer.register_forward_hook(hook)
    try:
        args = PolicyUpdateArgs(mini_batch_size=3, micro_batch_size=2)
        worker.train_step(batch, args)
    finally:
        handle.remove()
    assert len(seen) >= 3 and not torch.equal(seen[0][1], seen[-1][1])  # the weight moved
    for x, weight, out in seen:
        assert out.dtype == torch.bfloat16
        expected = torch.nn.functional.linear(x.to(torch.bfloat16), weight.to(torch.bfloat16))
        torch.testing.assert_close(out, expected, rtol=0, atol=0)

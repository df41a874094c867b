"""Micro-batching does not change the policy update: for every `loss_agg` mode the loss
and every parameter gradient of actor_train's micro-batched step (hf, deepspeed, fsdp2) equal
one full-batch computation on the untrimmed batch, for several splits (rows of uneven
length, a row budget, a token budget)."""

from __future__ import annotations

import pytest
import torch
from policy_step_reference import ENTROPY, KL, KL_ESTIMATOR, full_batch_step, policy_batch

from rollcli.algorithms.aggregation import LOSS_AGG_MODES
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.strategies.hf_model import load_causal_lm
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.train_engines import TrainStrategy
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4], [2, 9, 4, 8, 1], [6]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [22], [23, 24, 25, 26]]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
# (micro_batch_size, micro_batch_tokens): one row each, uneven pairs, 4 + 2 rows, and a
# token budget that groups rows by their padded length
SPLITS = [(1, None), (2, None), (4, None), (6, 14)]


def _batch(pad_id: int) -> Batch:
    return policy_batch(PROMPTS, RESPONSES, ADVANTAGES, pad_id)


@pytest.fixture(scope="module")
def reference(tiny_model):
    torch.manual_seed(0)
    return load_causal_lm(str(tiny_model), train=True)


def _worker(tiny_model, strategy: str = "hf", **options) -> ActorTrainWorker:
    # lr 0: the weights never move, so one worker serves every split
    return ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model),
            trainer=TrainerArgs(lr=0.0, grad_clip=None),
            num_threads=1,
            seed=0,
            strategy=TrainStrategy(strategy, **options),
        )
    )


def _check(worker, reference, captured_grads, mode: str, policy_loss: str = "ppo") -> None:
    batch = _batch(worker.tokenizer.pad_token_id)
    names = [n for n, _ in reference.named_parameters()]
    for micro, tokens in SPLITS:
        args = PolicyUpdateArgs(
            policy_loss=policy_loss,
            loss_agg=mode,
            micro_batch_size=micro,
            micro_batch_tokens=tokens,
            entropy_coef=ENTROPY,
            kl_loss_coef=KL,
            kl_estimator=KL_ESTIMATOR,
        )
        width = batch["response_mask"].shape[1]
        loss, grads = full_batch_step(reference, batch, args, norm_len=width)
        captured_grads.clear()
        metrics = worker.train_step(batch, args)
        assert metrics["loss"] == pytest.approx(loss, rel=1e-5), (mode, micro, tokens)
        (got,) = captured_grads
        assert len(got) == len(names)
        for name, g in zip(names, got, strict=True):
            g = g.full_tensor() if hasattr(g, "full_tensor") else g  # fsdp2: one rank's DTensor
            torch.testing.assert_close(
                g, grads[name], rtol=1e-4, atol=1e-6, msg=f"{mode} {micro} {tokens}: {name}"
            )


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_hf_micro_batches_make_the_full_batch_step(tiny_model, reference, captured_grads, mode):
    _check(_worker(tiny_model), reference, captured_grads, mode)


def test_raftpp_is_normalised_by_its_positive_tokens(tiny_model, reference, captured_grads):
    _check(_worker(tiny_model), reference, captured_grads, "seq-mean-token-mean", "raftpp")


@pytest.mark.parametrize(
    ("policy_loss", "advantages", "computed"),
    [
        ("raftpp", ADVANTAGES, [0, 2, 4]),  # raftpp: the positive rows alone carry a gradient
        ("ppo", [1.0, 0.0, 0.5, 0.0, -2.0, 0.0], [0, 2, 4]),  # ppo: rows whose advantage is 0
    ],
)
def test_rows_without_a_gradient_are_not_computed(
    tiny_model, reference, captured_grads, policy_loss, advantages, computed
):
    """Without an entropy bonus or a KL term, rows whose loss is exactly 0 skip the forward
    and backward (`rows_with_gradient`): the step's loss and gradients are still the full
    batch's, `trained_rows_frac` says how many rows were computed, and with an entropy
    bonus every row is computed again."""
    worker = _worker(tiny_model)
    batch = policy_batch(PROMPTS, RESPONSES, advantages, worker.tokenizer.pad_token_id)
    rows_seen: list[torch.Tensor] = []
    # each row's largest token is its own (the responses' tokens differ)
    hook = worker.model.get_decoder().register_forward_pre_hook(
        lambda _m, _a, kw: rows_seen.append(kw["input_ids"].amax(dim=1)), with_kwargs=True
    )
    try:
        for mode in ("seq-mean-token-mean", "seq-mean-token-sum-norm"):
            args = PolicyUpdateArgs(policy_loss=policy_loss, loss_agg=mode, micro_batch_size=2)
            width = batch["response_mask"].shape[1]
            loss, grads = full_batch_step(reference, batch, args, width, 0.0, 0.0)
            captured_grads.clear()
            rows_seen.clear()
            metrics = worker.train_step(batch, args)
            seen = sorted(int(t) for t in torch.cat(rows_seen))
            assert seen == sorted(max(PROMPTS[i] + RESPONSES[i]) for i in computed)
            assert metrics["trained_rows_frac"] == pytest.approx(len(computed) / len(PROMPTS))
            assert metrics["loss"] == pytest.approx(loss, rel=1e-5)
            (got,) = captured_grads
            for (name, expected), g in zip(grads.items(), got, strict=True):
                torch.testing.assert_close(g, expected, rtol=1e-4, atol=1e-6, msg=name)
        rows_seen.clear()
        with_bonus = PolicyUpdateArgs(policy_loss=policy_loss, entropy_coef=0.01)
        assert worker.train_step(batch, with_bonus)["trained_rows_frac"] == 1.0
        assert len(torch.cat(rows_seen)) == len(PROMPTS)
    finally:
        hook.remove()


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum-norm"])
def test_deepspeed_micro_batches_make_the_full_batch_step(
    tiny_model, reference, captured_grads, mode
):
    pytest.importorskip("deepspeed")
    _check(_worker(tiny_model, "deepspeed", zero_stage=0), reference, captured_grads, mode)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum-norm"])
def test_fsdp2_micro_batches_make_the_full_batch_step(tiny_model, reference, captured_grads, mode):
    import torch.distributed as dist

    opened_before = dist.is_initialized()  # DeepSpeed's, kept: its library holds a handle
    try:
        _check(_worker(tiny_model, "fsdp2"), reference, captured_grads, mode)
    finally:  # the one-rank group fsdp2 opened in this process
        if dist.is_initialized() and not opened_before:
            dist.destroy_process_group()


def test_critic_micro_batches_make_the_full_batch_step(tiny_model, captured_grads):
    """The critic's token-mean value loss too: each split's gradients equal one full-batch
    backward (before, a micro-batch's token mean was weighted by its rows)."""
    from rollcli.algorithms.value_loss import value_loss
    from rollcli.workers.critic import CriticArgs, CriticWorker, _values

    critic = CriticWorker(CriticArgs(str(tiny_model), lr=0.0, grad_clip=None, num_threads=1))
    with torch.no_grad():  # a value head that is not all zeros, so every weight has a gradient
        critic.model.score.weight.normal_(generator=torch.Generator().manual_seed(0))
    batch = _batch(critic.model.config.pad_token_id or 0)
    mask = batch["response_mask"]
    batch.set("values", torch.zeros(mask.shape))
    batch.set("returns", torch.tensor(ADVANTAGES)[:, None] * mask)
    critic.model.zero_grad(set_to_none=True)
    values = _values(critic.model, model_inputs(batch))
    loss, _ = value_loss(values, batch["values"], batch["returns"], mask, clip=0.2)
    loss.backward()
    expected = [p.grad.clone() for p in critic.model.parameters()]
    for micro in (1, 2, 4):
        captured_grads.clear()
        critic.train_step(
            batch, value_clip=0.2, micro_batch_size=micro, mini_batch_size=None, epochs=1
        )
        (got,) = captured_grads
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            err = f"micro {micro}: param {i}, max diff {float((g - e).abs().max()):.3g} of {float(e.abs().max()):.3g}"
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-6 * float(e.abs().max()), msg=err)

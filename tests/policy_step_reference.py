"""The reference a micro-batched policy step is checked against: one plain forward and
backward over the whole untrimmed batch (shared by the micro-batch and shared-prefix tests;
their `captured_grads` fixture is in tests/workers/conftest.py)."""

from __future__ import annotations

import torch

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.kl import kl_estimate
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.logprob_forward import model_inputs

ENTROPY, KL = 0.01, 0.1  # the entropy bonus and KL-in-loss weights both tests use
# k1 is unclamped: k3 saturates at its clamp (10) on these random log-probs, a constant with
# no gradient that would hide how the KL term is aggregated and split
KL_ESTIMATOR = "k1"


def policy_batch(
    prompts: list[list[int]], responses: list[list[int]], advantages: list[float], pad_id: int
) -> Batch:
    """A rollout batch with per-row advantages and old / reference log-probs off the current
    ones (so ratios clip and the KL is not 0)."""
    batch = Batch(rollout_tensors(prompts, responses, pad_id))
    mask = batch["response_mask"]
    noise = torch.Generator().manual_seed(0)
    batch.set("advantages", torch.tensor(advantages)[:, None] * mask)
    batch.set("old_logprobs", -2.0 + 0.3 * torch.randn(mask.shape, generator=noise))
    batch.set("ref_logprobs", -2.0 + 0.3 * torch.randn(mask.shape, generator=noise))
    return batch


def full_batch_step(  # noqa: ANN201
    model,  # noqa: ANN001
    batch: Batch,
    args: PolicyUpdateArgs,
    norm_len: int,
    entropy_coef: float = ENTROPY,
    kl_coef: float = KL,
):
    """The loss and gradients of one forward/backward over the whole untrimmed batch."""
    model.zero_grad(set_to_none=True)
    mask = batch["response_mask"]
    logprobs, entropy = response_logprobs(model, model_inputs(batch), with_entropy=True)
    inputs = PolicyLossInputs(
        logprobs=logprobs,
        advantages=batch["advantages"],
        mask=mask,
        old_logprobs=batch["old_logprobs"],
        agg=args.loss_agg,
        norm_len=norm_len,
    )
    loss, _ = compute_policy_loss(args.policy_loss, inputs)
    loss = loss - entropy_coef * aggregate_loss(entropy, mask, "token-mean")
    kl = kl_estimate(logprobs, batch["ref_logprobs"], args.kl_estimator)
    loss = loss + kl_coef * aggregate_loss(
        kl, mask, args.loss_agg, norm_len
    )  # aggregated like the policy term
    loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters()}

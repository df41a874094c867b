"""actor_train's step metrics are means over the whole batch, token-weighted, however the
batch is split into micro-batches (they were unweighted means of micro-batch means)."""

from __future__ import annotations

import pytest
import torch
from policy_step_reference import policy_batch

from rollcli.algorithms.aggregation import aggregate_loss
from rollcli.algorithms.kl import kl_estimate
from rollcli.algorithms.loss_inputs import PolicyLossInputs
from rollcli.algorithms.masked import masked_mean
from rollcli.algorithms.off_policy import mismatch_metrics
from rollcli.algorithms.policy_loss import compute_policy_loss
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.strategies.hf_model import load_causal_lm, response_logprobs
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.step_metrics import StepMetrics
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

# one 1-token row beside rows of 6 and 4 tokens: uneven micro-batches at every split
PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4], [2, 9, 4, 8, 1], [6]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [22], [23, 24, 25, 26]]
ADVANTAGES = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
SPLITS = [(1, None), (4, None), (6, 14)]


def test_weighted_metrics_by_hand() -> None:
    m = StepMetrics()
    m.add({"kl": (0.5, 1.0), "n": 1.0})  # a 1-token micro-batch
    m.add({"kl": (0.1, 9.0), "n": 3.0})  # a 9-token one
    m.add({"kl": (float("nan"), 0.0)})  # no tokens: no say
    # token mean (0.5 + 0.9) / 10 = 0.14, not (0.5 + 0.1) / 2 = 0.3
    assert m.means() == pytest.approx({"kl": 0.14, "n": 2.0})


def _full_batch_metrics(model, batch, args: PolicyUpdateArgs) -> dict[str, float]:
    """The metrics computed once over the whole untrimmed batch."""
    mask = batch["response_mask"]
    with torch.no_grad():
        logprobs, entropy = response_logprobs(model, model_inputs(batch), with_entropy=True)
    ratio = (batch["old_logprobs"] - batch["behaviour_logprobs"]).exp()
    inputs = PolicyLossInputs(
        logprobs=logprobs,
        advantages=batch["advantages"],
        mask=mask,
        old_logprobs=batch["old_logprobs"],
        is_weights=torch.minimum(ratio, torch.tensor(args.correction_cap)) * mask,
        agg=args.loss_agg,
        norm_len=mask.shape[1],
    )
    _, metrics = compute_policy_loss(args.policy_loss, inputs)
    kl = kl_estimate(logprobs, batch["ref_logprobs"], args.kl_estimator)
    return {
        **metrics,
        "entropy": float(aggregate_loss(entropy, mask, "token-mean")),
        "kl": float(aggregate_loss(kl, mask, "token-mean")),
        "off_policy_weight_mean": float(masked_mean(ratio.clamp(max=args.correction_cap), mask)),
        "off_policy_corrected_frac": float(
            masked_mean((ratio > args.correction_cap).float(), mask)
        ),
        **mismatch_metrics(batch["old_logprobs"], batch["behaviour_logprobs"], mask),
    }


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean"])
def test_metrics_are_the_whole_batch_means(tiny_model, loss_agg: str) -> None:
    worker = ActorTrainWorker(
        TrainedModelArgs(
            str(tiny_model), trainer=TrainerArgs(lr=0.0, grad_clip=None), num_threads=1, seed=0
        )
    )
    torch.manual_seed(0)
    reference = load_causal_lm(str(tiny_model), train=False)
    batch = policy_batch(PROMPTS, RESPONSES, ADVANTAGES, worker.tokenizer.pad_token_id)
    noise = torch.Generator().manual_seed(1)
    mask = batch["response_mask"]
    batch.set(
        "behaviour_logprobs", batch["old_logprobs"] + 0.5 * torch.randn(mask.shape, generator=noise)
    )
    tis = {"correction": "tis", "correction_cap": 1.5}
    base = PolicyUpdateArgs(loss_agg=loss_agg, kl_loss_coef=0.1, **tis)
    want = _full_batch_metrics(reference, batch, base)
    keys = ["pg_loss", "clipfrac", "ratio_mean", "approx_kl", "entropy", "kl"]
    keys += ["off_policy_weight_mean", "off_policy_corrected_frac", "mismatch_kl"]
    keys += ["mismatch_ratio_mean", "mismatch_ratio_min", "mismatch_ratio_max"]
    keys += ["mismatch_outside_band"]
    for micro, tokens in SPLITS:
        args = PolicyUpdateArgs(
            loss_agg=loss_agg,
            kl_loss_coef=0.1,
            **tis,
            micro_batch_size=micro,
            micro_batch_tokens=tokens,
        )
        got = worker.train_step(batch, args)
        for key in keys:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-6), (key, micro, tokens)

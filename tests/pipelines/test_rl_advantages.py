"""The RL pipeline's advantage stage (`pipelines/rl/advantages.add_advantages`) by hand."""

import pytest
import torch

from rollcli.algorithms.kl import FixedKLController
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.data.batch import Batch
from rollcli.pipelines.rl.advantages import add_advantages


def _batch(lengths: list[int], finished: list[bool], scores: list[float], width: int) -> Batch:
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    return Batch(
        {
            "response_mask": mask,
            "finished": torch.tensor(finished),
            "scores": torch.tensor(scores),
        }
    )


def test_mask_truncated_keeps_the_overlong_penalty_in_the_baseline():
    # max_new_tokens 10, buffer 0.2 -> 2 tokens: no penalty up to 8, -(L - 8) / 2 above.
    # Row 0 finished (wrong) at 9 tokens: 0 - 0.5 = -0.5. Rows 1-3 truncated at 10: 0 - 1.
    # Group [-0.5, -1, -1, -1]: mean -0.875, unbiased std sqrt(0.1875 / 3) = 0.25, so
    # A_0 = 0.375 / 0.25 = +1.5 (better than its truncated siblings); rows 1-3 leave the
    # loss (mask 0, advantage 0). Reading lengths after masking gave the truncated rows
    # length 0 and no penalty: group [-0.5, 0, 0, 0] and A_0 = -1.5.
    alg = AlgorithmConfig(advantage="grpo", kl_coef=0.0, overlong_buffer=0.2, mask_truncated=True)
    batch = _batch([9, 10, 10, 10], [True, False, False, False], [0.0] * 4, width=10)
    add_advantages(
        alg, batch, group_size=4, max_new_tokens=10, kl_ctl=FixedKLController(0.0), running=None
    )
    adv = batch["advantages"]
    assert adv[0, :9].tolist() == pytest.approx([1.5] * 9, rel=1e-5)
    assert adv[0, 9].item() == 0.0
    assert adv[1:].abs().sum().item() == 0.0
    assert batch["response_mask"].sum(dim=1).tolist() == [9.0, 0.0, 0.0, 0.0]


def test_the_adaptive_controller_reads_the_mean_kl_per_token_against_a_per_token_target():
    """Rows of 4 and 2 real tokens, k1 = 0.15 on each (the padding's 9.0 is left out): the
    step's `actor/kl_reward` is 0.15 per token (0.6 and 0.3 per sequence), past the default
    per-token target 0.1, so the coefficient rises: 0.05 * (1 + 0.2 * 2 / 10000). With the
    per-sequence default 6.0 it fell, 0.05 * (1 - 0.2 * 2 / 10000)."""
    from rollcli.pipelines.rl.advantages import make_kl_controller

    alg = AlgorithmConfig(kl_coef=0.05, kl_in="reward", kl_estimator="k1", kl_controller="adaptive")
    batch = _batch([4, 2], [True, True], [1.0, 0.0], width=4)
    ref = torch.full((2, 4), -1.0)
    batch.set("ref_logprobs", ref)
    batch.set("old_logprobs", ref + torch.tensor([[0.15] * 4, [0.15, 0.15, 9.0, 9.0]]))
    ctl = make_kl_controller(alg)
    metrics = add_advantages(alg, batch, group_size=2, max_new_tokens=4, kl_ctl=ctl, running=None)
    assert metrics["actor/kl_reward"] == pytest.approx(0.15)
    assert ctl.value == pytest.approx(0.05 * (1 + 0.2 * 2 / 10000), rel=1e-9)

"""The train / reference workers on multi-turn rows, whose loss mask has holes (plain
objects, tiny-random): micro-batch trimming must keep every turn."""

from __future__ import annotations

import pytest
import torch
from agentic_steps import agentic_step_advantages

from rollcli.algorithms.kl import FixedKLController
from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.config.algorithm import AlgorithmConfig
from rollcli.pipelines.rl.episode_batch import (
    DRIVER_FIELDS,
    episodes_to_batch,
)
from rollcli.rollout.chat_turns import TurnFormat
from rollcli.rollout.episode import Episode, EpisodeSpec, Limits
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
from rollcli.workers.trained_model import TrainedModelArgs


def _episode(fmt: TurnFormat, group_seed: int, replies: list[list[int]], reward: float) -> Episode:
    ep = Episode(EpisodeSpec(0, 0, group_seed))
    ep.start({"observation": "o", "state_key": "s"}, fmt, "o")
    for t, ids in enumerate(replies):
        ep.add_reply({"token_ids": ids, "text": "r", "finished": False})
        last = t == len(replies) - 1
        ep.observe(
            {"observation": "o", "reward": reward if last else 0.0, "terminated": last, "info": {}},
            fmt,
            Limits(9, 4096, 4),
            f"turn {t} observation",
        )
    return ep


@pytest.fixture(scope="module")
def batch(tiny_model):
    from rollcli.strategies.hf_model import load_tokenizer

    tok = load_tokenizer(tiny_model)
    fmt = TurnFormat(tok, "rules")
    eps = [_episode(fmt, 1, [[11, 12], [13, 14], [15]], 1.0), _episode(fmt, 1, [[16]], 0.0)]
    b = episodes_to_batch(eps, tok.pad_token_id)
    alg = AlgorithmConfig()
    agentic_step_advantages(
        alg, b, group_size=2, mode="starpo", max_new_tokens=4, kl_ctl=FixedKLController(0)
    )
    for key in DRIVER_FIELDS:
        b.fields.pop(key)
    return b


def test_logprobs_cover_every_turn_like_one_untrimmed_forward(tiny_model, batch) -> None:
    ref = ReferenceWorker(ReferenceArgs(str(tiny_model)))
    got = ref.compute_logprobs(batch, micro_batch_size=1)
    full, _ = response_logprobs(ref.model, model_inputs(batch))
    mask = batch["response_mask"].bool()
    assert torch.allclose(got[mask], full[mask], atol=1e-5)
    last_turn = mask[0].nonzero().flatten()[-1]
    assert last_turn > 10 and got[0, last_turn] != 0  # the third turn was not trimmed away


def test_train_step_moves_the_policy(tiny_model, batch) -> None:
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), seed=0)
    )
    before = worker.compute_logprobs(batch, micro_batch_size=2)
    out = worker.train_step(batch, PolicyUpdateArgs(policy_loss="pg", micro_batch_size=1))
    after = worker.compute_logprobs(batch, micro_batch_size=2)
    mask = batch["response_mask"].bool()
    assert out["grad_norm"] > 0
    # the better episode's tokens became likelier, the worse one's less likely
    assert (after[0][mask[0]] - before[0][mask[0]]).mean() > 0
    assert (after[1][mask[1]] - before[1][mask[1]]).mean() < 0


def test_sampler_logprobs_reweight_episodes_played_ahead(tiny_model) -> None:
    """Replies that bring the sampler's log-probs give `behaviour_logprobs` on the model's
    tokens (0 on the env's turns); with `correction: tis` the update takes the truncated
    weights min(exp(old - behaviour), cap); the worker reports the ratio's mean
    (`mismatch_ratio_mean`) and the share truncated (`off_policy_corrected_frac`)."""
    from rollcli.strategies.hf_model import load_tokenizer

    tok = load_tokenizer(tiny_model)
    fmt = TurnFormat(tok, "rules")

    def played(replies: list[list[int]], reward: float) -> Episode:
        ep = Episode(EpisodeSpec(0, 0, 1))
        ep.start({"observation": "o", "state_key": "s"}, fmt, "o")
        for t, ids in enumerate(replies):
            logprobs = [-0.5 - 0.25 * k for k in range(len(ids))]
            ep.add_reply({"token_ids": ids, "text": "r", "finished": False, "logprobs": logprobs})
            last = t == len(replies) - 1
            result = {"observation": "o", "reward": reward if last else 0.0, "terminated": last}
            ep.observe(result, fmt, Limits(9, 4096, 4), f"turn {t}")
        return ep

    b = episodes_to_batch([played([[11, 12], [13]], 1.0), played([[16]], 0.0)], tok.pad_token_id)
    mask = b["response_mask"].bool()
    behaviour = b["behaviour_logprobs"]
    assert behaviour[0][mask[0]].tolist() == [-0.5, -0.75, -0.5]  # two replies, env turn between
    assert behaviour[~mask].abs().sum() == 0
    alg = AlgorithmConfig()
    agentic_step_advantages(
        alg, b, group_size=2, mode="starpo", max_new_tokens=4, kl_ctl=FixedKLController(0)
    )
    for key in DRIVER_FIELDS:
        b.fields.pop(key)
    worker = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=1e-3), seed=0)
    )
    old = worker.compute_logprobs(b, micro_batch_size=2)
    ratio = (old - behaviour).exp()[mask]  # the update's own forward gives `old` (on-policy)
    out = worker.train_step(
        b, PolicyUpdateArgs(policy_loss="pg", micro_batch_size=2, correction="tis")
    )
    assert out["mismatch_ratio_mean"] == pytest.approx(float(ratio.mean()), rel=1e-4)
    assert out["off_policy_corrected_frac"] == pytest.approx(float((ratio > 2.0).float().mean()))

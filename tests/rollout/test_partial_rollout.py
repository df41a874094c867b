"""Partial rollouts on real workers held in this process (`LocalGroup`: actor_infer with the
hf engine, a reward worker): a sample paused in one rollout and continued in the next,
after the weights changed, keeps the tokens it had and each token's own behaviour log-prob,
so the importance ratios of its tokens are each against the policy that sampled them."""

from __future__ import annotations

import copy
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rollcli.algorithms.off_policy import tis_weights
from rollcli.data.batch_keys import BEHAVIOUR_LOGPROBS, PROMPT_WIDTH, RESPONSE_MASK
from rollcli.data.prompts import Prompt
from rollcli.distributed.local_group import LocalGroup
from rollcli.rollout.partial_rollout import PartialPool, PartialRollout
from rollcli.rollout.prompt_scheduler import RolloutScheduler, SchedulerOptions
from rollcli.strategies.sampling import SamplingParams
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.reward import RewardArgs, RewardWorker

GROUP = 4


@pytest.fixture(scope="module")
def eos_model(tmp_path_factory, tiny_model) -> Path:
    """tiny-random with 1,000 ids named EOS: replies end at different steps."""
    folder = tmp_path_factory.mktemp("models") / "tiny-eos"
    shutil.copytree(tiny_model, folder)
    config = folder / "generation_config.json"
    config.write_text(
        json.dumps({**json.loads(config.read_text()), "eos_token_id": [*range(1000, 2000)]})
    )
    return folder


def _scheduler(worker: ActorInferWorker) -> RolloutScheduler:
    tok = worker.tokenizer
    prompts = [
        Prompt(f"p{i}", ({"role": "user", "content": f"What is {i} + {i}?"},), str(2 * i))
        for i in range(40)
    ]
    ids = [tok.apply_chat_template(list(p.messages), add_generation_prompt=True) for p in prompts]
    ids = [x if isinstance(x[0], int) else x["input_ids"] for x in ids]
    drawn = iter(range(len(prompts)))

    def draw(n: int) -> tuple[list[Prompt], list[list[int]]]:
        picked = [next(drawn) for _ in range(n)]
        return [prompts[i] for i in picked], [ids[i] for i in picked]

    reward = RewardWorker(RewardArgs("math"))
    infer = LocalGroup("actor_infer", [worker])
    return RolloutScheduler(infer, LocalGroup("reward", [reward]), tok.pad_token_id, draw)


def _teacher_forced(model: torch.nn.Module, prompt: list[int], response: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    logp = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)
    return logp.gather(1, torch.tensor(response)[:, None]).squeeze(1)


def test_a_sample_from_two_policies_keeps_each_tokens_behaviour_logprob(eos_model) -> None:
    worker = ActorInferWorker(ActorInferArgs(str(eos_model), decode_batch=8))
    scheduler = _scheduler(worker)
    params = SamplingParams(n=GROUP, max_new_tokens=48, temperature=1.0, seed=3)
    opts = SchedulerOptions(group_size=GROUP, num_groups=2)
    pool = PartialPool()
    first = PartialRollout(scheduler, params, opts, pool, 0, max_staleness=2).result()
    assert first.batch is not None and len(first.rows) == 2 * GROUP
    paused = {
        (g.prompt.id, s.sample): list(s.token_ids)
        for g in pool.groups
        for s in g.samples
        if s.token_ids and not s.ended
    }
    assert paused, "no sample was paused mid-reply"
    before = {k: v.clone() for k, v in worker.model.state_dict().items()}
    with torch.no_grad():  # a weight update: policy version 1
        for p in worker.model.parameters():
            p.add_(torch.randn_like(p) * 0.05 * p.std().nan_to_num(0.02))
    scheduler.version = 1
    second = PartialRollout(scheduler, replace(params, seed=4), opts, pool, 1, max_staleness=2)
    result = second.result()
    batch = result.batch
    width = int(batch[PROMPT_WIDTH][0])
    checked = 0
    old_model = _copy_with(worker.model, before)
    for i, row in enumerate(result.rows):
        if row["policy_versions"] != [0, 1]:
            continue
        response = batch["input_ids"][i, width:][batch[RESPONSE_MASK][i].bool()].tolist()
        prompt = batch["input_ids"][i, :width][batch["attention_mask"][i, :width].bool()].tolist()
        key = next(k for k, tokens in paused.items() if response[: len(tokens)] == tokens)
        k = len(paused[key])
        assert 0 < k < len(response)  # the continued ids start with the paused ones
        behaviour = batch[BEHAVIOUR_LOGPROBS][i, : len(response)]
        under_old = _teacher_forced(old_model, prompt, response)
        under_new = _teacher_forced(worker.model, prompt, response)
        assert torch.allclose(behaviour[:k], under_old[:k], atol=1e-4)
        assert torch.allclose(behaviour[k:], under_new[k:], atol=1e-4)
        assert (behaviour[:k] - under_new[:k]).abs().max() > 1e-3  # the versions differ
        # the trainer's ratio (old log-probs: the new weights) is each token's own
        weights = tis_weights(
            under_new[None], behaviour[None], torch.ones(1, len(response)), cap=10.0
        )
        assert torch.allclose(weights[0], (under_new - behaviour).exp().clamp(max=10.0), atol=1e-5)
        assert torch.allclose(weights[0, k:], torch.ones(len(response) - k), atol=1e-3)
        checked += 1
    assert checked, "no trained sample spans two policy versions"
    assert result.metrics["rollout/partial_continued"] >= checked
    assert result.metrics["rollout/token_staleness/max"] == 1.0


def _copy_with(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    other = copy.deepcopy(model)
    other.load_state_dict(state)
    return other

"""Routing replay in the trainer's forwards, fed by the hf engine's own record (R3) or the
old policy's (R2), on tiny-random-moe in fp32: plain rows, shared-prefix rows, multi-turn
conversations held in sessions, and a later forward under changed weights."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from rollcli.data.batch import Batch
from rollcli.data.batch_keys import (
    BEHAVIOUR_LOGPROBS,
    OLD_ROUTED_EXPERTS,
    RESPONSE_MASK,
    ROUTED_EXPERTS,
)
from rollcli.models.loading import resolve_model
from rollcli.models.moe_routing import routing_state, take_stats
from rollcli.rollout.result import build_batch, routing_rows
from rollcli.strategies.hf_infer import HFInferEngine
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.hf_shared_prefix import shared_prefix_logprobs
from rollcli.strategies.logprob_forward import logprobs_and_routing, model_inputs
from rollcli.strategies.routing_replay import recorded_forwards, set_router_replay
from rollcli.strategies.sampling import SamplingParams

EOS, PAD = 2, 0


def _model():
    return AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random-moe")).eval()


@pytest.fixture(scope="module")
def noisy_engine():
    """An engine whose experts are perturbed, as kernel and precision differences do."""
    engine = HFInferEngine(_model(), [EOS], PAD, session_mib=64)
    engine.routing.noise, engine.routing.generator = 1.0, torch.Generator().manual_seed(0)
    return engine


def _mismatch(logprobs: torch.Tensor, batch: Batch) -> float:
    mask = batch[RESPONSE_MASK] > 0
    return float((logprobs - batch[BEHAVIOUR_LOGPROBS]).abs()[mask].mean())


def _sampled_batch(engine: HFInferEngine) -> Batch:
    torch.manual_seed(0)
    prompts = [list(range(5, 17)), list(range(30, 37))]
    gens = engine.generate(prompts, SamplingParams(n=3, max_new_tokens=10))
    fields = {
        BEHAVIOUR_LOGPROBS: [g.logprobs for g in gens],
        ROUTED_EXPERTS: [g.routed_experts for g in gens],
    }
    ids = [prompts[g.prompt_index] for g in gens]
    return build_batch(ids, [g.token_ids for g in gens], [0.0] * 6, [True] * 6, PAD, fields)


@pytest.mark.parametrize("forward", [response_logprobs, shared_prefix_logprobs])
def test_r3_replays_the_engines_experts_on_plain_and_shared_prefix_rows(noisy_engine, forward):
    batch = _sampled_batch(noisy_engine)
    assert batch[ROUTED_EXPERTS].shape == (*batch["input_ids"].shape, 2, 2)
    trainer = _model()
    with torch.no_grad():
        own = _mismatch(forward(trainer, model_inputs(batch))[0], batch)
        agreement = take_stats(trainer)["moe/routing_agreement"]
        set_router_replay(trainer, "R3")
        replayed = _mismatch(forward(trainer, model_inputs(batch))[0], batch)
    assert agreement < 0.8  # the noise moved at least 20% of token x layer choices
    assert own > 1e-3
    assert replayed < 1e-5


def test_r3_replays_every_turn_of_a_conversation_held_in_a_session(noisy_engine):
    """Turn 2 reuses turn 1's KV (its session): the experts of the reused tokens come from
    the session's record, the new ones from this turn's forwards."""
    torch.manual_seed(1)
    first = list(range(40, 52))
    params = SamplingParams(n=1, max_new_tokens=8)
    turn1 = noisy_engine.generate([first], params, sessions=["ep"])[0]
    env = [60, 61, 62, 63]  # the environment's reply
    context = first + turn1.token_ids + env
    turn2 = noisy_engine.generate([context], params, sessions=["ep"])[0]
    assert turn2.cached_tokens > 0  # the session was reused
    assert len(turn2.routed_experts) == len(context) + len(turn2.token_ids)
    response = turn1.token_ids + env + turn2.token_ids
    batch = build_batch([first], [response], [0.0], [True], PAD, {})
    width = batch["input_ids"].shape[1] - len(response)
    batch.set(
        ROUTED_EXPERTS, routing_rows([turn2.routed_experts], [first], width, batch["input_ids"])
    )
    behaviour = torch.zeros(1, len(response))
    behaviour[0, : len(turn1.logprobs)] = torch.tensor(turn1.logprobs)
    behaviour[0, len(response) - len(turn2.logprobs) :] = torch.tensor(turn2.logprobs)
    mask = torch.zeros(1, len(response))
    mask[0, : len(turn1.token_ids)] = 1
    mask[0, len(response) - len(turn2.token_ids) :] = 1
    batch.set(BEHAVIOUR_LOGPROBS, behaviour)
    batch.set(RESPONSE_MASK, mask)
    trainer = _model()
    with torch.no_grad():
        own = _mismatch(response_logprobs(trainer, model_inputs(batch))[0], batch)
        set_router_replay(trainer, "R3")
        replayed = _mismatch(response_logprobs(trainer, model_inputs(batch))[0], batch)
    assert own > 1e-3
    assert replayed < 1e-5


def test_r2_replays_the_old_policys_experts_after_the_weights_moved(noisy_engine):
    batch = _sampled_batch(noisy_engine)
    trainer = _model()
    set_router_replay(trainer, "R2")
    with torch.no_grad():
        _, old = logprobs_and_routing(trainer, batch, micro_batch_size=4, temperature=1.0)
        batch.set(OLD_ROUTED_EXPERTS, old)
        real = batch["attention_mask"].bool()
        assert bool((old[real] >= 0).all()) and bool((old[~real] == -1).all())
        for router in routing_state(trainer).routers:  # an update moved the routers
            router.weight.add_(torch.randn_like(router.weight))
        inputs = model_inputs(batch)
        for mode in ("R2", "off"):
            routing_state(trainer).mode = mode
            with recorded_forwards(trainer) as record:
                response_logprobs(trainer, inputs)
            later = record.routing(inputs["input_ids"].shape)
            same = bool((later[real] == old[real]).all())
            assert same == (mode == "R2")


def test_r2_or_r3_on_a_dense_model_is_refused_in_one_line():
    dense = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random"))
    with pytest.raises(ValueError, match="router_replay=R3: the model has no MoE layers"):
        set_router_replay(dense, "R3")
    set_router_replay(dense, "off")

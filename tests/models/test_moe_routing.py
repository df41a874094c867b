"""Routing record, replay, compare and noise on real transformers MoE models."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
)

from rollcli.models.loading import resolve_model
from rollcli.models.moe_routing import (
    UNSET,
    gate_weights,
    moe_routers,
    replay_refusal,
    routed,
    take_recorded,
    take_stats,
)

SMALL = dict(
    vocab_size=256,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
)


@pytest.fixture(scope="module")
def qwen3():
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random-moe")).eval()


def _mixtral():
    torch.manual_seed(0)
    config = MixtralConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2)
    return MixtralForCausalLM(config).eval()


def _qwen2(norm: bool):
    torch.manual_seed(0)
    config = Qwen2MoeConfig(
        **SMALL,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=32,
        norm_topk_prob=norm,
    )
    return Qwen2MoeForCausalLM(config).eval()


@pytest.mark.parametrize("build", [_mixtral, lambda: _qwen2(True), lambda: _qwen2(False)])
def test_gate_weights_at_the_own_choice_are_the_models_own(build):
    model = build()
    hidden = torch.randn(7, SMALL["hidden_size"])
    for router in moe_routers(model):
        logits, scores, ids = router(hidden)
        assert torch.allclose(gate_weights(router, logits, ids), scores.float(), atol=1e-7)


def test_gate_weights_by_hand():
    """softmax([0, ln 2, ln 3, 0]) = [1, 2, 3, 1] / 7; at experts (2, 0) renormalised: 3/4, 1/4;
    without renormalising (Qwen2-MoE's norm_topk_prob false): 3/7, 1/7."""
    logits = torch.log(torch.tensor([[1.0, 2.0, 3.0, 1.0]]))
    ids = torch.tensor([[2, 0]])
    renorm = moe_routers(_qwen2(True))[0]
    plain = moe_routers(_qwen2(False))[0]
    assert gate_weights(renorm, logits, ids)[0].tolist() == pytest.approx([0.75, 0.25])
    assert gate_weights(plain, logits, ids)[0].tolist() == pytest.approx([3 / 7, 1 / 7])


def test_replaying_the_recorded_choice_repeats_the_forward_bit_for_bit(qwen3):
    ids = torch.randint(0, 1000, (3, 9))
    with torch.no_grad(), routed(qwen3, record=True) as state:
        before = qwen3(ids).logits
        recorded = take_recorded(state)
    assert recorded.shape == (27, 2, 2) and recorded.dtype == torch.int16
    take_stats(qwen3)
    with torch.no_grad(), routed(qwen3, recorded.view(3, 9, 2, 2), compare=recorded):
        after = qwen3(ids).logits
    assert torch.equal(before, after)
    assert take_stats(qwen3)["moe/routing_agreement"] == 1.0


def test_a_replayed_choice_is_run_and_the_router_still_gets_a_gradient(qwen3):
    ids = torch.randint(0, 1000, (2, 6))
    with torch.no_grad(), routed(qwen3, record=True) as state:
        own = qwen3(ids).logits
        recorded = take_recorded(state)
    other = (recorded + 1) % 4  # every token's set moves to other experts
    other[:, :, 1] = (recorded[:, :, 1] + 1) % 4
    other[other[:, :, 0] == other[:, :, 1]] = recorded[other[:, :, 0] == other[:, :, 1]]
    unset = other.clone()
    unset[:5] = UNSET  # the first 5 tokens keep their own choice
    take_stats(qwen3)
    qwen3.zero_grad()
    with routed(qwen3, unset, compare=unset):
        replayed = qwen3(ids).logits
        replayed.sum().backward()
    router = moe_routers(qwen3)[0]
    assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0
    changed = (replayed - own).abs().amax(dim=-1).flatten()
    assert changed[:5].max() < 1e-5  # causal: tokens before the first replayed one keep theirs
    assert changed[5:].min() > 1e-3, changed
    stats = take_stats(qwen3)
    assert stats["moe/routing_agreement"] < 0.5
    qwen3.zero_grad()


def test_without_replay_the_choice_is_only_compared(qwen3):
    ids = torch.randint(0, 1000, (2, 6))
    with torch.no_grad(), routed(qwen3, record=True) as state:
        own = qwen3(ids).logits
        recorded = take_recorded(state)
    with torch.no_grad(), routed(qwen3, compare=(recorded + 1) % 4):
        again = qwen3(ids).logits
    assert torch.equal(own, again)
    assert take_stats(qwen3)["moe/routing_agreement"] < 1.0


def test_noise_changes_the_choice_but_not_the_gate_rule(qwen3):
    ids = torch.randint(0, 1000, (4, 16))
    with torch.no_grad(), routed(qwen3, record=True) as state:
        qwen3(ids)
        own = take_recorded(state)
        state.noise, state.generator = 1.0, torch.Generator().manual_seed(0)
        state.record = True
        qwen3(ids)
        noisy = take_recorded(state)
        state.noise = 0.0
    differ = (own.sort(-1).values != noisy.sort(-1).values).any(-1).float().mean()
    assert differ >= 0.2


def test_load_spread_is_reported(qwen3):
    take_stats(qwen3)
    with torch.no_grad(), routed(qwen3):
        qwen3(torch.randint(0, 1000, (2, 32)))
    cv = take_stats(qwen3)["moe/expert_load_cv"]
    assert 0.0 <= cv < 2.0


def test_a_dense_model_is_refused_in_one_line():
    model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random"))
    assert "no MoE layers" in replay_refusal(model)
    assert replay_refusal(_mixtral()) is None


def test_activation_checkpointings_recompute_replays_the_same_experts():
    """The forward a backward pass recomputes runs inside no `routed` block: the replay
    stays set, so the gradients equal those of a forward that kept its activations."""
    ids = torch.randint(0, 1000, (2, 8))
    grads = []
    for checkpointing in (False, True):
        model = AutoModelForCausalLM.from_pretrained(resolve_model("tiny-random-moe")).train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        with torch.no_grad(), routed(model, record=True) as state:
            model(ids)
            recorded = take_recorded(state)
        other = recorded.flip(-1) % 4 + 0  # same sets, swapped order: then shift one expert
        other[..., 0] = (recorded[..., 0] + 2) % 4
        other[other[..., 0] == other[..., 1]] = recorded[other[..., 0] == other[..., 1]]
        with routed(model, other):
            loss = model(ids).logits.float().pow(2).mean()
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    plain, recomputed = grads
    assert plain.keys() == recomputed.keys()
    for name in plain:
        assert torch.allclose(plain[name], recomputed[name], atol=1e-6), name


def test_the_router_losses_are_transformers_balancing_loss_and_the_z_loss(qwen3):
    from rollcli.models.moe_routing import kept_router_logits, router_losses

    ids = torch.randint(0, 1000, (2, 7))
    with kept_router_logits(qwen3) as state, routed(qwen3):
        out = qwen3(ids, output_router_logits=True)
        balance, z = router_losses(state)
    assert torch.allclose(balance, out.aux_loss, atol=1e-6)  # the model's own aux loss
    logits = torch.cat(out.router_logits)
    assert torch.allclose(z, torch.logsumexp(logits, dim=-1).square().mean(), atol=1e-6)
    assert balance.requires_grad and z.requires_grad  # they train the router

"""`smollm2-135m-moe`: the embedded model upcycled into a Mixtral whose experts are copies of
its MLPs computes what the embedded model does, and its routers spread the tokens."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, MixtralConfig

from rollcli.models.loading import resolve_model
from rollcli.models.registry import get_model_spec
from rollcli.models.spec import param_count
from rollcli.planning.model_spec import spec_from_config

# real prompts, none of them the upcycler's calibration chats, with answers a model might give
CHATS = [
    (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many "
        "clips in May. How many clips did Natalia sell altogether in April and May?",
        "In May she sold 48 / 2 = 24 clips. Altogether she sold 48 + 24 = 72 clips.",
    ),
    (
        "What is 36 + 58? Put the final answer in \\boxed{}.",
        "36 + 58 = 94, so the answer is \\boxed{94}.",
    ),
    (
        "Give me three tips for staying healthy.",
        "1. Eat a balanced diet with plenty of fruit and vegetables. 2. Exercise regularly. "
        "3. Get enough sleep every night.",
    ),
    (
        "Explain what a list comprehension is in Python.",
        "A list comprehension builds a list from an iterable in one expression, for example "
        "[x * x for x in range(10)] gives the squares of 0 to 9.",
    ),
]


@pytest.fixture(scope="module")
def models():
    dense_path, moe_path = resolve_model("smollm2-135m"), resolve_model("smollm2-135m-moe")
    dense = AutoModelForCausalLM.from_pretrained(dense_path).eval()
    moe = AutoModelForCausalLM.from_pretrained(moe_path).eval()
    return dense, moe, AutoTokenizer.from_pretrained(moe_path)


def test_it_is_a_mixtral_of_the_registry_numbers(models):
    dense, moe, _ = models
    spec, config = get_model_spec("smollm2-135m-moe"), moe.config
    assert type(moe).__name__ == "MixtralForCausalLM"
    assert (config.num_local_experts, config.num_experts_per_tok) == (4, 2)
    assert config.router_jitter_noise == 0.0
    assert config.router_aux_loss_coef == MixtralConfig().router_aux_loss_coef
    assert config.rope_parameters == dense.config.rope_parameters
    assert config.rms_norm_eps == dense.config.rms_norm_eps and config.tie_word_embeddings
    assert sum(p.numel() for p in moe.parameters()) == param_count(spec)  # no difference
    # the planner reads the same numbers from the folder's config.json
    read = spec_from_config(config.to_dict(), name=spec.name)
    assert replace(read, source=spec.source, description=spec.description) == spec


def test_each_expert_is_the_dense_mlp(models):
    dense, moe, _ = models
    x = torch.randn(5, dense.config.hidden_size, generator=torch.Generator().manual_seed(0))
    for i in (0, 29):
        want = dense.model.layers[i].mlp(x)
        experts = moe.model.layers[i].mlp.experts
        for e in range(4):  # transformers' own expert forward, all weight on expert e
            got = experts(x, torch.full((5, 1), e), torch.ones(5, 1))
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


def _ids(tokenizer, user: str, assistant: str) -> torch.Tensor:
    chat = [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return tokenizer.apply_chat_template(chat, return_tensors="pt", return_dict=True)["input_ids"]


@torch.no_grad()
def test_logits_are_the_dense_models_and_the_load_is_spread(models):
    dense, moe, tokenizer = models
    slots = torch.zeros(moe.config.num_hidden_layers, 4)
    for user, assistant in CHATS:
        ids = _ids(tokenizer, user, assistant)
        out = moe(input_ids=ids, output_router_logits=True)
        assert (out.logits - dense(input_ids=ids).logits).abs().max() < 1e-3
        for layer, logits in enumerate(out.router_logits):
            chosen = logits.topk(2, dim=-1).indices.flatten()
            slots[layer] += torch.bincount(chosen, minlength=4)
    share = slots / slots.sum(dim=1, keepdim=True)  # of each layer's token x top-2 slots
    assert share.min() > 0.10, share

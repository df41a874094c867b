"""The chunked LM head gives the log-probs, entropies and gradients of one full forward
(`model(...).logits` through `log_softmax`), whatever the chunk size, and never builds the
whole `[B, T, V]` logits. Every test runs twice: with a training call's logits kept for the
backward (small calls on CPU) and with them rebuilt chunk by chunk (large calls)."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.padding import rollout_tensors
from rollcli.strategies import lm_head
from rollcli.strategies.hf_model import load_causal_lm, response_logprobs
from rollcli.strategies.lm_head import head_logprobs, plain_head

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6], [1, 9]]
RESPONSES = [[30, 31, 32, 33], [40], [50, 51, 52, 53, 54, 55]]


@pytest.fixture(autouse=True, params=["kept", "rebuilt"])
def logits_path(request, monkeypatch) -> str:
    if request.param == "rebuilt":
        monkeypatch.setattr(lm_head, "KEEP_LOGITS_BYTES", 0)
    return request.param


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.manual_seed(0)
    return load_causal_lm(str(tiny_model), train=True)


@pytest.fixture(scope="module")
def tensors():
    return rollout_tensors(PROMPTS, RESPONSES, 0)


def _reference(model, tensors, temperature: float):
    """Log-probs and entropies from the whole logits of one ordinary forward, `[B, R]`."""
    width = int(tensors["prompt_width"][0])
    logits = model(
        input_ids=tensors["input_ids"],
        attention_mask=tensors["attention_mask"],
        position_ids=tensors["position_ids"],
    ).logits[:, width - 1 : -1]
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    labels = tensors["input_ids"][:, width:]
    picked = logp.gather(-1, labels[..., None]).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    return picked, entropy


def _grads(model, loss: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad()
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_logprobs_entropy_and_gradients_equal_a_full_forward(model, tensors) -> None:
    real = tensors["attention_mask"][:, int(tensors["prompt_width"][0]) :].bool()
    weights = torch.linspace(-1.0, 1.0, real.numel()).reshape(real.shape) * real

    lp, ent = response_logprobs(model, tensors, temperature=0.7, with_entropy=True)
    got = _grads(model, (lp * weights).sum() + 0.3 * (ent * real).sum())
    ref_lp, ref_ent = _reference(model, tensors, 0.7)
    want = _grads(model, (ref_lp * weights).sum() + 0.3 * (ref_ent * real).sum())

    assert torch.allclose(lp[real], ref_lp[real], atol=1e-5)
    assert torch.allclose(ent[real], ref_ent[real], atol=1e-5)
    assert (lp[~real] == 0).all() and (ent[~real] == 0).all()  # past each row's end
    assert got.keys() == want.keys() and len(got) > 10
    for name, grad in want.items():
        assert torch.allclose(got[name], grad, atol=1e-5, rtol=1e-4), name


def test_small_chunks_give_the_same_values_and_gradients(model) -> None:
    torch.manual_seed(1)
    head = plain_head(model)
    hidden = torch.randn(11, model.config.hidden_size, requires_grad=True)
    labels = torch.randint(0, model.config.vocab_size, (11,))

    def run(chunk: int):
        lp, ent = head_logprobs(
            head, hidden, labels, temperature=1.3, with_entropy=True, chunk_tokens=chunk
        )
        model.zero_grad()
        hidden.grad = None
        (lp.sum() - ent.sum()).backward()
        return lp.detach(), ent.detach(), hidden.grad.clone(), head.weight.grad.clone()

    whole, chunked = run(64), run(3)  # one chunk vs four (3 + 3 + 3 + 2)
    for a, b in zip(whole, chunked, strict=True):
        assert torch.allclose(a, b, atol=1e-5)
    logp = torch.log_softmax(head(hidden).float() / 1.3, dim=-1)
    assert torch.allclose(whole[0], logp.gather(-1, labels[:, None]).squeeze(-1), atol=1e-5)


def test_no_grad_calls_keep_nothing_for_backward(model, tensors) -> None:
    with torch.no_grad():
        lp, ent = response_logprobs(model, tensors)
    assert ent is None and not lp.requires_grad
    ref_lp, _ = _reference(model, tensors, 1.0)
    real = tensors["attention_mask"][:, int(tensors["prompt_width"][0]) :].bool()
    assert torch.allclose(lp[real], ref_lp[real].detach(), atol=1e-5)


def test_heads_that_scale_their_logits_use_the_models_forward(model) -> None:
    assert plain_head(model) is model.get_output_embeddings()
    model.config.logit_scale = 0.5
    try:
        assert plain_head(model) is None
    finally:
        del model.config.logit_scale
    assert plain_head(torch.nn.Linear(2, 2)) is None  # a wrapper, not a transformers model


@pytest.mark.parametrize("frozen_head", [False, True])
def test_an_unused_entropy_or_a_frozen_head_takes_only_the_gradients_needed(
    model, frozen_head
) -> None:
    """The fused chunk's backward with no gradient for the entropy (entropy_coef 0: it is a
    metric) and with a frozen head (LoRA) equals autograd through `log_softmax`."""
    torch.manual_seed(2)
    head = plain_head(model)
    hidden = torch.randn(7, model.config.hidden_size, requires_grad=True)
    labels = torch.randint(0, model.config.vocab_size, (7,))
    weights = torch.linspace(-1.0, 2.0, 7)
    head.weight.requires_grad_(not frozen_head)
    try:
        model.zero_grad()
        lp, ent = head_logprobs(head, hidden, labels, temperature=0.8, with_entropy=True)
        (lp * weights).sum().backward()
        got_hidden, got_weight = hidden.grad.clone(), head.weight.grad
        hidden.grad = None
        logp = torch.log_softmax(head(hidden).float() / 0.8, dim=-1)
        model.zero_grad()
        (logp.gather(-1, labels[:, None]).squeeze(-1) * weights).sum().backward()
    finally:
        head.weight.requires_grad_(True)
    assert ent.shape == (7,) and torch.isfinite(ent).all()
    assert torch.allclose(got_hidden, hidden.grad, atol=1e-5)
    if frozen_head:
        assert got_weight is None and head.weight.grad is None
    else:
        assert torch.allclose(got_weight, head.weight.grad, atol=1e-5)


def test_a_head_with_a_bias_over_several_chunks_equals_autograd() -> None:
    """Weight, bias and hidden gradients of the fused head (accumulated over chunks, its
    logits in reused CPU buffers of another width than the model's) equal autograd's."""
    torch.manual_seed(3)
    head = torch.nn.Linear(8, 13, bias=True)
    hidden = torch.randn(5, 8, requires_grad=True)
    labels = torch.randint(0, 13, (5,))
    weights = torch.linspace(-1.0, 2.0, 5)

    lp, ent = head_logprobs(head, hidden, labels, with_entropy=True, chunk_tokens=2)
    ((lp * weights).sum() + 0.5 * ent.sum()).backward()
    got = [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]
    hidden.grad = None
    head.zero_grad()
    logp = torch.log_softmax(head(hidden), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    (
        (logp.gather(-1, labels[:, None]).squeeze(-1) * weights).sum() + 0.5 * entropy.sum()
    ).backward()
    assert torch.allclose(lp, logp.gather(-1, labels[:, None]).squeeze(-1), atol=1e-6)
    for a, b in zip(got, [hidden.grad, head.weight.grad, head.bias.grad], strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_a_second_forward_before_the_backward_rebuilds_its_logits(logits_path) -> None:
    """The kept buffer is lent to one forward at a time: a second forward before the first's
    backward (two losses in one graph) rebuilds its logits, and a backward run twice
    (`retain_graph`) rebuilds them the second time; every gradient is still autograd's."""
    torch.manual_seed(4)
    head = torch.nn.Linear(8, 13, bias=False)
    hidden = torch.randn(6, 8, requires_grad=True)
    labels = torch.randint(0, 13, (6,))
    first, _ = head_logprobs(head, hidden[:3], labels[:3])
    lent = lm_head._scratch.lent
    assert (lent is not None and lent() is not None) == (logits_path == "kept")
    second, ent = head_logprobs(head, hidden[3:], labels[3:], with_entropy=True)
    loss = first.sum() * 2 + second.sum() - ent.sum()
    loss.backward(retain_graph=True)
    once = [hidden.grad.clone(), head.weight.grad.clone()]
    loss.backward()
    twice = [hidden.grad.clone(), head.weight.grad.clone()]
    hidden.grad = None
    head.zero_grad()
    logp = torch.log_softmax(head(hidden), dim=-1)
    picked = logp.gather(-1, labels[:, None]).squeeze(-1)
    entropy = -(logp.exp() * logp)[3:].sum(-1)
    (picked[:3].sum() * 2 + picked[3:].sum() - entropy.sum()).backward()
    for a, b, c in zip(once, twice, [hidden.grad, head.weight.grad], strict=True):
        assert torch.allclose(a, c, atol=1e-6)
        assert torch.allclose(b, 2 * c, atol=1e-6)
    assert lm_head._scratch.lent is None or lm_head._scratch.lent() is None  # given back


def test_micro_batches_add_the_tied_head_gradient_into_one_buffer(model) -> None:
    """Over several backward passes (an optimizer step's micro-batches) the head adds its
    weight gradient to `.grad` in place, and the tied input embedding's sparse rows join it
    there: one `[V, H]` buffer for the whole step, equal to autograd's sum of the passes."""
    torch.manual_seed(5)
    head = plain_head(model)
    embedding = model.get_input_embeddings()
    assert head.weight is embedding.weight
    embedding.sparse = True
    batches = [torch.randint(0, model.config.vocab_size, (n,)) for n in (4, 7, 3)]
    try:
        model.zero_grad(set_to_none=True)
        storage = []
        for ids in batches:
            hidden = embedding(ids) * 1.5
            lp, _ = head_logprobs(head, hidden, ids.roll(1))
            lp.sum().backward()
            storage.append(head.weight.grad.data_ptr())
        got = head.weight.grad.clone()
    finally:
        embedding.sparse = False
    model.zero_grad(set_to_none=True)
    for ids in batches:
        logp = torch.log_softmax(head(embedding(ids) * 1.5).float(), dim=-1)
        logp.gather(-1, ids.roll(1)[:, None]).sum().backward()
    assert not got.is_sparse and len(set(storage)) == 1
    assert torch.allclose(got, head.weight.grad, atol=1e-5)


def test_a_hooked_head_weight_gets_its_gradient_through_autograd() -> None:
    """A weight with a hook (as a wrapper that reduces gradients would register) is handed
    its gradient by autograd, so the hook sees it."""
    torch.manual_seed(6)
    head = torch.nn.Linear(8, 13, bias=False)
    seen = []
    head.weight.register_hook(lambda g: seen.append(g.clone()))
    hidden = torch.randn(5, 8)
    labels = torch.randint(0, 13, (5,))
    head_logprobs(head, hidden, labels)[0].sum().backward()
    assert len(seen) == 1 and torch.equal(seen[0], head.weight.grad)

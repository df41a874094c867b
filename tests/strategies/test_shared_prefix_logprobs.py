"""Shared-prefix log-probs equal the plain per-row forward (fp32): sdpa and eager attention,
the decoder + chunked head path and the model's own logits path, padding, prompts of
different lengths, groups of one, an empty response; and through the workers' micro-batched
`compute_logprobs` (actor and reference)."""

from __future__ import annotations

import pytest
import torch

from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.data.shared_prefix import shared_prefix_layout
from rollcli.strategies.hf_model import response_logprobs
from rollcli.strategies.hf_shared_prefix import shared_prefix_logprobs, shared_prefix_values

# groups of 3, 1 and 2 with prompts of 4, 2 and 3 tokens, responses of 0 to 6 tokens
PROMPTS = [[1, 2, 3, 4], [1, 2, 3, 4], [5, 6], [7, 8, 9], [1, 2, 3, 4], [7, 8, 9]]
RESPONSES = [[10, 11, 12], [13], [14, 15, 16, 17, 18, 19], [20, 21], [], [23, 24, 25, 26]]


def _inputs() -> dict[str, torch.Tensor]:
    return rollout_tensors(PROMPTS, RESPONSES, pad_id=0)


def _model(tiny_model, attn: str):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), attn_implementation=attn)
    assert model.config._attn_implementation == attn
    return model.eval()


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_and_entropy_equal_the_plain_rows(tiny_model, attn, temperature):
    model = _model(tiny_model, attn)
    inputs = _inputs()
    with torch.no_grad():
        plain, plain_ent = response_logprobs(
            model, inputs, temperature=temperature, with_entropy=True
        )
        shared, shared_ent = shared_prefix_logprobs(
            model, inputs, temperature=temperature, with_entropy=True
        )
    assert (plain != 0).sum() == sum(map(len, RESPONSES))  # every response token is compared
    torch.testing.assert_close(shared, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared_ent, plain_ent, rtol=1e-5, atol=1e-5)


def test_the_mask_is_what_keeps_responses_apart(tiny_model):
    """The same packed rows under a plain causal mask (a 2-D padding mask: a response sees
    its prompt and the responses before it) give other log-probs for the responses that
    come second, so the equality above rests on the 4-D mask."""
    model = _model(tiny_model, "sdpa")
    inputs = _inputs()
    layout = shared_prefix_layout(
        inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], 4
    )
    with torch.no_grad():
        hidden = model.get_decoder()(
            input_ids=layout.input_ids,
            attention_mask=(layout.segments >= 0).long(),
            position_ids=layout.position_ids,
            use_cache=False,
        ).last_hidden_state
        unmasked = layout.scatter(
            torch.log_softmax(model.lm_head(layout.pick(hidden)), -1)
            .gather(-1, layout.labels[:, None])
            .squeeze(-1)
        )
        plain, _ = response_logprobs(model, inputs)
    first_of_group = [0, 2, 3]  # rows whose response sees no other response either way
    later = [1, 5]
    torch.testing.assert_close(unmasked[first_of_group], plain[first_of_group], atol=1e-5, rtol=0)
    assert (unmasked[later] - plain[later]).abs().max() > 1e-3


def test_the_models_own_logits_path(tiny_model):
    """Models whose logits are not `head(decoder(x))` (here: told so by a `logit_scale` in the
    config, which Llama does not read) go through `model(...)` with `logits_to_keep`."""
    from rollcli.strategies.lm_head import plain_head

    model = _model(tiny_model, "sdpa")
    inputs = _inputs()
    with torch.no_grad():
        plain, plain_ent = response_logprobs(model, inputs, with_entropy=True)
        model.config.logit_scale = 1.0
        assert plain_head(model) is None
        shared, shared_ent = shared_prefix_logprobs(model, inputs, with_entropy=True)
    torch.testing.assert_close(shared, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(shared_ent, plain_ent, rtol=1e-5, atol=1e-5)


def test_other_attention_is_refused_with_the_key_to_change(tiny_model):
    model = _model(tiny_model, "sdpa")
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match="train.shared_prefix=false"):
        shared_prefix_logprobs(model, _inputs())


def test_a_packed_row_longer_than_the_sliding_window_is_refused(tiny_model):
    model = _model(tiny_model, "sdpa")
    model.config.sliding_window = 8
    with pytest.raises(ValueError, match="sliding window"):
        shared_prefix_logprobs(model, _inputs())


def test_critic_values_equal_the_plain_rows(tiny_model):
    from transformers import AutoModelForTokenClassification

    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(str(tiny_model), num_labels=1).eval()
    inputs = _inputs()
    width = int(inputs["prompt_width"][0])
    real = inputs["attention_mask"][:, width:].bool()
    with torch.no_grad():
        plain = model(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            position_ids=inputs["position_ids"],
        ).logits[:, width - 1 : -1, 0]
        shared = shared_prefix_values(model, inputs)
    torch.testing.assert_close(shared, plain * real, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("micro", "tokens"), [(1, None), (3, None), (6, 12)])
def test_workers_compute_the_same_logprobs(tiny_model, micro, tokens):
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    batch = Batch(_inputs())
    actor = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=0.0), num_threads=1)
    )
    reference = ReferenceWorker(ReferenceArgs(str(tiny_model), num_threads=1))
    for worker in (actor, reference):
        plain = worker.compute_logprobs(batch, micro, max_tokens=tokens)
        shared = worker.compute_logprobs(batch, micro, max_tokens=tokens, shared_prefix=True)
        torch.testing.assert_close(shared, plain, rtol=1e-5, atol=1e-5)


def test_lora_policy_and_reference_logprobs(tiny_model):
    """With LoRA adapters (made non-zero, so they change the numbers) the policy's and the
    reference's (adapters off) log-probs equal the plain ones."""
    from rollcli.strategies.lora import LoraSpec
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    spec = LoraSpec(r=4, alpha=8.0, target_modules=("q_proj", "v_proj"))
    actor = ActorTrainWorker(
        TrainedModelArgs(str(tiny_model), trainer=TrainerArgs(lr=0.0), num_threads=1, lora=spec)
    )
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in actor.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen))
    batch = Batch(_inputs())
    policy = actor.compute_logprobs(batch, 6)
    ref = actor.compute_ref_logprobs(batch, 6)
    assert (policy - ref).abs().max() > 1e-3  # the adapters matter
    torch.testing.assert_close(
        actor.compute_logprobs(batch, 6, shared_prefix=True), policy, rtol=1e-5, atol=1e-5
    )
    torch.testing.assert_close(
        actor.compute_ref_logprobs(batch, 6, shared_prefix=True), ref, rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("own_logits", [False, True])
def test_a_head_mask_gives_the_same_values_and_gradients_where_it_is_set(
    tiny_model, shared, own_logits
):
    """The training forward runs the LM head only on the loss mask (an agentic row's env
    turns need no log-probs): there the log-probs, entropies and every parameter gradient of
    a masked loss equal the unmasked forward's; elsewhere the values are 0."""
    model = _model(tiny_model, "sdpa")
    if own_logits:
        model.config.logit_scale = 1.0  # the model's own logits path
    forward = shared_prefix_logprobs if shared else response_logprobs
    inputs = _inputs()
    real = inputs["attention_mask"][:, 4:].bool()
    head_mask = real.clone()
    head_mask[0, 1] = head_mask[2, 0] = head_mask[2, 4] = head_mask[5, :] = False
    assert head_mask.sum() < real.sum()

    def run(mask):
        model.zero_grad()
        lp, ent = forward(model, inputs, with_entropy=True, head_mask=mask)
        ((lp + 0.1 * ent) * head_mask).sum().backward()
        return lp.detach(), ent.detach(), [p.grad.clone() for p in model.parameters()]

    model.requires_grad_(True)
    full_lp, full_ent, full_grads = run(None)
    lp, ent, grads = run(head_mask)
    torch.testing.assert_close(lp[head_mask], full_lp[head_mask], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ent[head_mask], full_ent[head_mask], rtol=1e-5, atol=1e-6)
    assert (full_lp[real & ~head_mask] != 0).all()  # the unmasked forward had values there
    assert (lp[~head_mask] == 0).all() and (ent[~head_mask] == 0).all()
    for g, full in zip(grads, full_grads, strict=True):
        torch.testing.assert_close(g, full, rtol=1e-4, atol=1e-6)


def _saved_masks(length: int, storages: set[int]):
    """Autograd's saved-tensor hooks that collect the storages of the `[B, 1, L, L]` float
    masks a forward keeps for its backward."""

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 4 and t.shape[1:] == (1, length, length) and t.dtype.is_floating_point:
            storages.add(t.untyped_storage().data_ptr())
        return t

    return torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_every_layer_saves_the_same_mask_for_the_backward(tiny_model, attn):
    """One additive mask for the whole model: torch's attention would turn a bool mask into
    a float copy inside every layer's call and keep each copy for the backward (4·L² bytes
    a layer; 1.8 GB for a 4,016-token packed row of smollm2-135m's 30 layers)."""
    model = _model(tiny_model, attn).train()
    inputs = _inputs()
    length = shared_prefix_layout(
        inputs["input_ids"], inputs["attention_mask"], inputs["position_ids"], 4
    ).input_ids.shape[1]
    square: set[int] = set()
    with _saved_masks(length, square):
        shared_prefix_logprobs(model, inputs)
    assert model.config.num_hidden_layers > 1
    assert len(square) <= 1


def test_padded_plain_rows_save_one_mask_and_give_the_same_logprobs(tiny_model):
    """Plain rows of different lengths (padding): one additive mask for every layer, and
    the log-probs of the 2-D padding mask that transformers would expand itself."""
    import rollcli.strategies.hf_model as hf_model

    model = _model(tiny_model, "sdpa").train()
    inputs = _inputs()
    length = inputs["input_ids"].shape[1]
    square: set[int] = set()
    with _saved_masks(length, square):
        ours, _ = response_logprobs(model, inputs)
    assert len(square) == 1
    with torch.no_grad(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_model, "padded_rows_mask", lambda model, mask: mask)
        theirs, _ = response_logprobs(model, inputs)
    assert torch.equal(ours.detach(), theirs)


def test_critic_values_of_padded_rows_save_one_mask(tiny_model):
    """The critic's plain-row forward hands over the same one additive mask, with the values
    the 2-D padding mask gives."""
    from transformers import AutoModelForTokenClassification

    from rollcli.workers.critic import _values

    torch.manual_seed(0)
    model = AutoModelForTokenClassification.from_pretrained(str(tiny_model), num_labels=1).eval()
    inputs = _inputs()
    width = int(inputs["prompt_width"][0])
    square: set[int] = set()
    with _saved_masks(inputs["input_ids"].shape[1], square):
        ours = _values(model, inputs)
    assert len(square) == 1
    with torch.no_grad():
        theirs = model(
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            position_ids=inputs["position_ids"],
        ).logits[:, width - 1 : -1, 0]
    real = inputs["attention_mask"][:, width:].bool()
    assert torch.equal(ours.detach()[real], theirs[real])

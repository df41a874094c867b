"""A tied embedding's sparse gradient (`hf_train.sparse_tied_embedding`) gives the update of
the dense one, and only a tied, trainable embedding is made sparse."""

from __future__ import annotations

import copy

import torch

from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.strategies.hf_model import load_causal_lm, response_logprobs
from rollcli.strategies.hf_train import HFTrainer
from rollcli.strategies.logprob_forward import model_inputs
from rollcli.strategies.trainer import TrainerArgs

PROMPTS = [[1, 17, 42, 99, 7], [1, 5, 6], [1, 9], [1, 5, 6]]
RESPONSES = [[30, 31, 32, 33], [40], [50, 51, 52, 53, 54, 55], []]  # one row empty


def _loss(model):  # noqa: ANN001, ANN202
    def loss(micro: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        mask = micro["response_mask"]
        logprobs, _ = response_logprobs(model, model_inputs(micro))
        return -(logprobs * mask).sum() / mask.sum().clamp(min=1), {}

    return loss


def _step(model, micro_batch_size: int, sparse: bool) -> HFTrainer:
    trainer = HFTrainer(model, TrainerArgs(lr=1e-2, grad_clip=1.0))
    assert model.get_input_embeddings().sparse
    model.get_input_embeddings().sparse = sparse
    trainer.update(
        Batch(rollout_tensors(PROMPTS, RESPONSES, 0)),
        loss_fn=_loss(model),
        mini_batch_size=None,
        micro_batch_size=micro_batch_size,
    )
    return trainer


def test_a_sparse_tied_embedding_gives_the_dense_update(tiny_model) -> None:
    torch.manual_seed(0)
    base = load_causal_lm(str(tiny_model), train=True)
    assert base.get_input_embeddings().weight is base.get_output_embeddings().weight
    for micro in (1, 4):  # a micro-batch of the empty row alone: the embedding's rows only
        sparse, dense = copy.deepcopy(base), copy.deepcopy(base)
        _step(sparse, micro, sparse=True)
        _step(dense, micro, sparse=False)
        moved = sparse.get_input_embeddings().weight - base.get_input_embeddings().weight
        assert moved.abs().max() > 0
        for (name, a), b in zip(sparse.named_parameters(), dense.parameters(), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7, msg=name)


def test_only_a_tied_trainable_embedding_is_made_sparse(tiny_model) -> None:
    model = load_causal_lm(str(tiny_model), train=True)
    model.get_input_embeddings().weight.requires_grad_(False)
    HFTrainer(model, TrainerArgs(lr=0.0))
    assert not model.get_input_embeddings().sparse  # frozen (e.g. LoRA's base)
    model.get_input_embeddings().weight.requires_grad_(True)
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    HFTrainer(model, TrainerArgs(lr=0.0))
    assert not model.get_input_embeddings().sparse  # untied

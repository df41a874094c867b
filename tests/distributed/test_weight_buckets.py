"""How the weight sync cuts a model into broadcasts: small tensors share buckets of one
dtype, a tensor of DIRECT_BYTES or more travels alone (from and into the tensors
themselves), and a receiver loading in place gets that tensor written where it lives."""

from __future__ import annotations

import torch
from weight_sync_pair import send_weights

from rollcli.distributed.weight_sync import DIRECT_BYTES, _buckets

BIG = DIRECT_BYTES // 4  # float32 elements of a tensor that travels alone


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(3, generator=g),
        "b": torch.randn(BIG, generator=g),
        "c": torch.randn(4, generator=g),
        "d": torch.randn(5, generator=g).double(),
        "e": torch.randn(BIG - 1, generator=g),
    }


def test_a_large_tensor_is_a_bucket_of_its_own() -> None:
    buckets = _buckets([([k], t) for k, t in _tensors().items()])
    plan = [[names[0] for names, _ in bucket] for bucket in buckets]
    assert plan == [["a"], ["b"], ["c"], ["d"], ["e"]]  # c and d: different dtypes


def test_in_place_receive_writes_large_tensors_where_they_live() -> None:
    sent = _tensors()
    received = {k: torch.zeros_like(t) for k, t in sent.items()}
    pointers = {k: t.data_ptr() for k, t in received.items()}
    model = torch.nn.Module()
    for k, t in received.items():
        model.register_buffer(k, t)
    send_weights(sent, model)
    for k, t in sent.items():
        assert torch.equal(getattr(model, k), t), k
        assert getattr(model, k).data_ptr() == pointers[k], k

"""Verified weight syncs: the receiver's fingerprints of what its model holds equal the
sender's of what it sent, through the real gloo sync; a tensor left stale is named."""

from __future__ import annotations

import torch
from weight_sync_pair import send_weights

from rollcli.distributed.sync_check import SAMPLES, first_difference, tensor_print


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 48), torch.nn.ReLU(), torch.nn.Linear(48, 8))


def test_a_sync_is_verified_and_a_stale_tensor_is_named() -> None:
    source, target = _model(0), _model(1)
    sender, receiver = send_weights(source, target)
    assert list(sender.prints) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert (
        receiver.prints == sender.prints
        and first_difference(sender.prints, receiver.prints) is None
    )
    assert torch.equal(target[0].weight, source[0].weight)
    stale = _model(2)
    sender, receiver = send_weights(source, stale, stale=True)
    assert first_difference(sender.prints, receiver.prints) == "0.weight"
    assert not torch.equal(stale[0].weight, source[0].weight)
    assert torch.equal(stale[2].weight, source[2].weight)  # the rest arrived


def test_a_cast_sync_prints_the_values_sent() -> None:
    source, target = _model(0), _model(1).to(torch.bfloat16)
    sender, receiver = send_weights(source, target, dtype=torch.bfloat16)
    assert receiver.prints == sender.prints  # the bf16 bits, on both sides


def test_the_print_reads_bits_of_evenly_spaced_elements() -> None:
    t = torch.zeros(SAMPLES * 4)
    assert tensor_print(t) == (0, 0)
    t[2] = 1.0  # the sampled elements are 4 apart, from the 3rd: index 2 is the first
    bits = torch.tensor([1.0]).view(torch.int32).item()
    assert tensor_print(t) == (bits, bits)
    t[1] = 5.0  # not a sampled element: a partly stale tensor can pass, a stale one cannot
    assert tensor_print(t) == (bits, bits)
    nan = torch.full((3,), float("nan"))
    assert tensor_print(nan) == tensor_print(nan.clone())  # bits, not values: NaN equals NaN

"""fsdp2 for real with two gloo ranks, each a process of its own (tests/fsdp2_ranks.py): their
updates equal one `HFTrainer` process's on the whole batch, which only averaged gradients
give, and a checkpoint (DCP shards) is all a fresh trainer or fresh processes need to make
the next update bit for bit."""

from __future__ import annotations

import pytest
import torch
from fsdp2_ranks import hf_reference, run_ranks


@pytest.fixture(scope="module")
def two_ranks(tiny_model, tmp_path_factory):
    """Two ranks: update, checkpoint, update; then a fresh trainer loads and updates."""
    folder = tmp_path_factory.mktemp("fsdp2")
    run_ranks(2, folder, "train", str(tiny_model))
    return folder


@pytest.fixture(scope="module")
def one_process(tiny_model):
    return hf_reference(str(tiny_model))


def _load(path):  # noqa: ANN001, ANN202
    return torch.load(path, weights_only=True)


def test_two_ranks_make_the_one_process_update(two_ranks, one_process) -> None:
    metrics, weights = one_process
    per_rank = [_load(two_ranks / f"train-metrics-{r}.pt") for r in range(2)]
    for step in range(2):
        # the norm of the whole batch's mean gradient: summed gradients would be twice it
        # (and Adam, blind to the scale, would hide that in the weights). The gradients
        # are the same bit for bit; their norm is not: 6.3M squares of the embedding's
        # gradient summed in fp32 are off by ~1e-5 (one process 4.919368, the ranks'
        # shards 4.919393, fp64 4.919418 in the first update)
        expected = pytest.approx([metrics[step]["grad_norm"]] * 2, rel=5e-5)
        assert [m[step]["grad_norm"] for m in per_rank] == expected
        # each rank's loss is its own rows'; their mean is the whole batch's
        nll = sum(m[step]["nll"] for m in per_rank) / 2
        assert nll == pytest.approx(metrics[step]["nll"], rel=1e-6)
        assert [m[step]["lr"] for m in per_rank] == [metrics[step]["lr"]] * 2
    assert metrics[0]["lr"] != metrics[1]["lr"]  # the schedule moves (warm-up, decay)
    for step, name in ((0, "step-1.pt"), (1, "train-step-2.pt")):
        got = _load(two_ranks / name)
        assert got.keys() == weights[step].keys()
        for key, tensor in got.items():
            # fp32 differences only: the tied embedding's gradient sums in another order
            torch.testing.assert_close(tensor, weights[step][key], rtol=0, atol=1e-6, msg=key)
    moved = _load(two_ranks / "train-step-2.pt")["model.norm.weight"]
    assert not torch.equal(moved, weights[0]["model.norm.weight"])


def test_a_fresh_trainer_resumes_the_two_rank_checkpoint_bit_for_bit(two_ranks) -> None:
    uninterrupted = _load(two_ranks / "train-step-2.pt")
    reloaded = _load(two_ranks / "reload-step-2.pt")
    assert all(torch.equal(reloaded[k], uninterrupted[k]) for k in uninterrupted)
    for rank in range(2):
        train, reload = (_load(two_ranks / f"{m}-metrics-{rank}.pt") for m in ("train", "reload"))
        assert reload[0] == train[1]  # same loss, norm and scheduled lr


def test_fresh_processes_resume_the_checkpoint_bit_for_bit(two_ranks, tiny_model) -> None:
    run_ranks(2, two_ranks, "resume", str(tiny_model))  # new processes: the ranks' memory is gone
    uninterrupted = _load(two_ranks / "train-step-2.pt")
    resumed = _load(two_ranks / "resume-step-2.pt")
    assert all(torch.equal(resumed[k], uninterrupted[k]) for k in uninterrupted)
    for rank in range(2):
        train, resume = (_load(two_ranks / f"{m}-metrics-{rank}.pt") for m in ("train", "resume"))
        assert resume[0] == train[1]

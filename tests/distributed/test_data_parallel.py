"""Data-parallel actor_train for real: two Ray ranks of ActorTrainWorker (tiny-random, gloo)
make the same update as one worker on the whole batch, and their checkpoint reads back."""

from __future__ import annotations

import pytest
import torch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.distributed import data_parallel
from rollcli.distributed.cluster import Cluster, WorkerResources
from rollcli.strategies.hf_model import load_tokenizer
from rollcli.strategies.train_engines import TrainStrategy
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.trained_model import TrainedModelArgs

PROMPTS = [[1, 2, 3, 4], [5, 6], [7, 8, 9], [3, 4], [2, 9, 4], [6]]
RESPONSES = [[10, 11, 12], [13], [14, 15], [16, 17, 18], [19, 20], [21, 22, 23]]
ADVANTAGES = [1.0, -1.0, 1.0, -0.5, 0.25, -2.0]
# two optimizer steps of 4 and 2 rows, token-mean over the whole mini-batch: the one worker
# groups rows 0-3 into two micro-batches by length, each rank its own two rows into one,
# and every split must give the same gradient (each share divides by all ranks' tokens)
ARGS = PolicyUpdateArgs(
    mini_batch_size=4,
    micro_batch_size=2,
    micro_batch_tokens=None,
    entropy_coef=0.01,
    loss_agg="token-mean",
)


pytestmark = pytest.mark.usefixtures("ray_session")  # the suite's one Ray (tests/conftest.py)


def _batch(pad_id: int) -> Batch:
    batch = Batch(rollout_tensors(PROMPTS, RESPONSES, pad_id))
    batch.set("advantages", torch.tensor(ADVANTAGES)[:, None] * batch["response_mask"])
    return batch


def _args(tiny_model, strategy: str = "hf", rank: int = 0, world_size: int = 1, **options):
    return TrainedModelArgs(
        str(tiny_model),
        trainer=TrainerArgs(lr=1e-2, grad_clip=1.0),
        strategy=TrainStrategy(strategy, **options),
        seed=0,
        rank=rank,
        world_size=world_size,
        num_threads=1,
    )


def _two_ranks(tiny_model, strategy: str = "hf", **options) -> Cluster:
    cluster = Cluster(
        "actor_train",
        ActorTrainWorker,
        2,
        WorkerResources(num_cpus=0.5),
        lambda rank: _args(tiny_model, strategy, rank, 2, **options),
    )
    import ray

    address = data_parallel.connect(cluster)
    # the ranks meet at rank 0's node as Ray knows it (not the loopback): one node here
    assert address.rsplit(":", 1)[0] == ray.util.get_node_ip_address()
    return cluster


def _step_two_ranks(cluster: Cluster, batch: Batch) -> list[dict]:
    order = data_parallel.shard_order(len(batch), ARGS.mini_batch_size, 2)
    assert order == [0, 1, 4, 2, 3, 5]  # rank 0: rows 0,1 | 4; rank 1: rows 2,3 | 5
    return cluster.dispatch(ActorTrainWorker.train_step, batch.select(order), args=ARGS)


def _saved_weights(folder) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_two_hf_ranks_make_the_one_worker_update(tiny_model, tmp_path) -> None:
    pad = load_tokenizer(str(tiny_model)).pad_token_id
    one = ActorTrainWorker(_args(tiny_model))
    before = {k: v.clone() for k, v in one.model.state_dict().items()}
    m_one = one.train_step(_batch(pad), ARGS)

    cluster = _two_ranks(tiny_model)
    try:
        per_rank = _step_two_ranks(cluster, _batch(pad))
        # the averaged gradient is the whole batch's: same clipped norm on both ranks
        expected = pytest.approx([m_one["grad_norm"]] * 2, rel=1e-5)  # float sum order
        assert [m["grad_norm"] for m in per_rank] == expected
        # the loss the ranks report, averaged, is the whole batch's
        assert sum(m["loss"] for m in per_rank) / 2 == pytest.approx(m_one["loss"], rel=1e-5)
        # token-weighted metrics are all-reduced: every rank reports the whole batch's
        for key in ("pg_loss", "entropy", "clipfrac", "ratio_mean"):
            assert [m[key] for m in per_rank] == pytest.approx([m_one[key]] * 2, rel=1e-4)
        cluster.call(ActorTrainWorker.save_pretrained, str(tmp_path))  # rank 0 writes
        logprobs = cluster.call(ActorTrainWorker.compute_logprobs, _batch(pad))
    finally:
        cluster.kill()
    saved = _saved_weights(tmp_path)
    expected = one.model.state_dict()
    moved = 0
    # Adam divides by sqrt(v): float-order differences (micro-batches sum in another order
    # than the ranks) are magnified in the few near-zero gradient entries, so compare each
    # tensor's difference with the size of its update instead of entry by entry
    for name, tensor in saved.items():
        update = (expected[name] - before[name]).norm()
        assert (tensor - expected[name]).norm() <= 1e-3 * update, name
        moved += not torch.equal(tensor, before[name])
    assert moved > len(saved) // 2  # the step changed the weights
    torch.testing.assert_close(logprobs[0], logprobs[1])  # the ranks stay identical
    torch.testing.assert_close(logprobs[0], one.compute_logprobs(_batch(pad)), rtol=1e-4, atol=1e-5)
    assert data_parallel.mean_metrics(per_rank)["pg_loss"] == pytest.approx(
        sum(m["pg_loss"] for m in per_rank) / 2
    )


def test_rank_one_does_not_write_the_checkpoint(tiny_model, tmp_path) -> None:
    worker = ActorTrainWorker(_args(tiny_model))
    worker.rank = 1  # what a second data-parallel rank is, without its group
    worker.save_pretrained(str(tmp_path))
    worker.save_state(str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    assert worker.broadcast_weights() == 0.0  # rank 0 sends; the others only gather


@pytest.mark.slow
@pytest.mark.parametrize("stage", [2, 3])
def test_two_deepspeed_ranks_make_the_one_worker_update(tiny_model, tmp_path, stage) -> None:
    pytest.importorskip("deepspeed")
    pad = load_tokenizer(str(tiny_model)).pad_token_id
    one = ActorTrainWorker(_args(tiny_model))
    before = {k: v.clone() for k, v in one.model.state_dict().items()}
    one.train_step(_batch(pad), ARGS)

    cluster = _two_ranks(tiny_model, "deepspeed", zero_stage=stage)
    try:
        _step_two_ranks(cluster, _batch(pad))
        cluster.call(ActorTrainWorker.save_pretrained, str(tmp_path))  # ZeRO-3: both ranks gather
        cluster.call(ActorTrainWorker.save_state, str(tmp_path))  # each rank its partition
    finally:
        cluster.kill()
    # ZeRO's reduce-scatter sums in another order and Adam magnifies that in the few
    # near-zero gradient entries (one in ~30000 is off by 1e-4): compare each tensor's
    # difference with the size of its update instead of entry by entry
    for name, tensor in _saved_weights(tmp_path).items():
        expected = one.model.state_dict()[name]
        update = (expected - before[name]).norm()
        assert (tensor - expected).norm() < 1e-3 * update, name
    assert (tmp_path / "deepspeed" / "state").is_dir()


@pytest.mark.slow
def test_two_fsdp2_ranks_make_the_one_worker_update(tiny_model, tmp_path) -> None:
    """The worker wiring under Ray (the trainer itself: tests/distributed/test_fsdp2_ranks.py):
    both ranks gather for the saved folder, each writes its DCP shards."""
    pad = load_tokenizer(str(tiny_model)).pad_token_id
    one = ActorTrainWorker(_args(tiny_model))
    before = {k: v.clone() for k, v in one.model.state_dict().items()}
    m_one = one.train_step(_batch(pad), ARGS)

    cluster = _two_ranks(tiny_model, "fsdp2")
    try:
        per_rank = _step_two_ranks(cluster, _batch(pad))
        expected = pytest.approx([m_one["grad_norm"]] * 2, rel=1e-4)
        assert [m["grad_norm"] for m in per_rank] == expected
        cluster.call(
            ActorTrainWorker.save_pretrained, str(tmp_path)
        )  # both ranks gather, rank 0 writes
        cluster.call(ActorTrainWorker.save_state, str(tmp_path))  # each rank its shards
        logprobs = cluster.call(ActorTrainWorker.compute_logprobs, _batch(pad))
    finally:
        cluster.kill()
    # the hf worker's chunked LM head and FSDP2's whole logits round differently, and Adam
    # magnifies that in the few near-zero gradient entries: compare each tensor's difference
    # with the size of its update (tests/strategies/test_fsdp2_train.py compares to 1e-6)
    for name, tensor in _saved_weights(tmp_path).items():
        expected = one.model.state_dict()[name]
        update = (expected - before[name]).norm()
        assert (tensor - expected).norm() < 1e-3 * update, name
    torch.testing.assert_close(logprobs[0], logprobs[1])
    assert (tmp_path / "fsdp2" / ".metadata").is_file()


def test_shard_order_gives_each_rank_its_part_of_every_mini_batch() -> None:
    # mini-batches [0-7] and [8-11]: rank 0 takes 0-3 and 8-9, rank 1 takes 4-7 and 10-11
    assert data_parallel.shard_order(12, 8, 2) == [0, 1, 2, 3, 8, 9, 4, 5, 6, 7, 10, 11]
    assert data_parallel.shard_order(6, None, 3) == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="do not split over 4 ranks"):
        data_parallel.shard_order(12, 6, 4)
    assert data_parallel.mean_metrics([{"a": 1.0, "b": 4.0}, {"a": 3.0}]) == {"a": 2.0, "b": 4.0}

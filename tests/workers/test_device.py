"""A worker's device: chosen in one place (`pick_device`), batches moved to it, results
moved back to the CPU; and the weight sync's backend choice. Runs without a GPU: the
CUDA answers are asked of `pick_device` with `cuda_available=True`, never executed."""

from __future__ import annotations

import pytest
import torch

from rollcli.algorithms.update_args import PolicyUpdateArgs
from rollcli.data.batch import Batch
from rollcli.data.padding import rollout_tensors
from rollcli.distributed.weight_sync import choose_backend
from rollcli.strategies.device import DeviceUnavailableError, batch_to, pick_device, to_cpu
from rollcli.strategies.trainer import TrainerArgs
from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker
from rollcli.workers.critic import CriticArgs, CriticWorker
from rollcli.workers.reference import ReferenceArgs, ReferenceWorker
from rollcli.workers.trained_model import TrainedModelArgs


def test_no_gpu_given_means_the_cpu_even_where_cuda_exists() -> None:
    assert pick_device(0) == torch.device("cpu")
    assert pick_device(0, cuda_available=True) == torch.device("cpu")


def test_a_gpu_share_means_the_gpu_ray_made_visible() -> None:
    # Ray's CUDA_VISIBLE_DEVICES lists the assigned GPU first: it is cuda:0 in the worker
    assert pick_device(0.5, cuda_available=True) == torch.device("cuda", 0)
    assert pick_device(1, cuda_available=True) == torch.device("cuda", 0)


def test_a_gpu_given_without_cuda_is_refused_not_run_on_the_cpu() -> None:
    with pytest.raises(DeviceUnavailableError, match=r"given 0.5 GPU .* --gpus 0"):
        pick_device(0.5, cuda_available=False)
    if not torch.cuda.is_available():  # this machine: the real probe says no
        with pytest.raises(DeviceUnavailableError, match="torch sees no CUDA"):
            pick_device(1)


def test_batch_to_moves_tensors_and_keeps_fields() -> None:
    batch = Batch({"x": torch.ones(2, 3)}, fields={"text": ["a", "b"]}, meta={"k": 1})
    assert batch_to(batch, torch.device("cpu")) is batch  # already there: no copy
    moved = batch_to(batch, torch.device("meta"))  # a second device that needs no GPU
    assert moved["x"].device.type == "meta" and moved["x"].shape == (2, 3)
    assert moved["text"] == ["a", "b"] and moved.meta == {"k": 1}
    assert batch["x"].device.type == "cpu"  # the caller's batch is untouched


def test_to_cpu_reaches_into_containers() -> None:
    t = torch.ones(2, requires_grad=True) * 2
    out = to_cpu({"a": t, "b": [t, (t, 3.0)], "c": "s"})
    assert out["a"].device.type == "cpu" and not out["a"].requires_grad
    assert isinstance(out["b"][1], tuple) and out["b"][1][1] == 3.0 and out["c"] == "s"


def _slot(kind: str, node: str | None = None, gpus: tuple[str, ...] = ()) -> dict:
    return {"type": kind, "node": node, "gpus": list(gpus)}


def test_nccl_when_every_side_has_a_gpu_of_its_own_ipc_when_they_share_one() -> None:
    cpu = _slot("cpu")
    assert choose_backend([cpu, cpu, cpu]) == "gloo"
    assert choose_backend([_slot("cuda", "n0", ("0",)), cpu]) == "gloo"  # mixed
    separate = [_slot("cuda", "n0", ("0",)), _slot("cuda", "n0", ("1",))]
    assert choose_backend(separate) == "nccl"
    colocated = [_slot("cuda", "n0", ("0",)), _slot("cuda", "n0", ("0",))]
    assert choose_backend(colocated) == "cuda_ipc"  # one GPU: handles (NCCL would refuse)
    two_nodes = [_slot("cuda", "n0", ("0",)), _slot("cuda", "n1", ("0",))]
    assert choose_backend(two_nodes) == "nccl"
    assert choose_backend([_slot("cuda"), _slot("cuda")]) == "gloo"  # GPU ids unknown


def _rollout(pad_id: int) -> Batch:
    tensors = rollout_tensors([[1, 2, 3], [4, 5]], [[6, 7], [8]], pad_id)
    batch = Batch(tensors)
    batch.set("advantages", torch.tensor([[1.0, 1.0], [-1.0, 0.0]]) * batch["response_mask"])
    return batch


def test_workers_given_no_gpu_run_on_the_cpu_and_return_cpu_values(tiny_model) -> None:
    path = str(tiny_model)
    train = ActorTrainWorker(
        TrainedModelArgs(path, trainer=TrainerArgs(lr=1e-3), num_threads=1, num_gpus=0)
    )
    ref = ReferenceWorker(ReferenceArgs(path, num_threads=1, num_gpus=0))
    critic = CriticWorker(CriticArgs(path, lr=1e-3, num_threads=1, num_gpus=0))
    infer = ActorInferWorker(ActorInferArgs(path, num_threads=1, num_gpus=0))
    for w in (train, ref, critic, infer):
        assert w.device == torch.device("cpu")
        assert {p.device.type for p in w.model.parameters()} == {"cpu"}
    assert infer.device_slot() == train.device_slot() == {"type": "cpu", "node": None, "gpus": []}
    batch = _rollout(train.tokenizer.pad_token_id)
    for values in (
        train.compute_logprobs(batch),
        ref.compute_logprobs(batch),
        critic.compute_values(batch),
    ):
        assert values.device.type == "cpu" and values.shape == batch["response_mask"].shape
    metrics = train.train_step(batch, PolicyUpdateArgs(micro_batch_size=1))
    assert all(isinstance(v, float) for v in metrics.values()) and metrics["grad_norm"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU-only machine")
def test_a_worker_given_a_gpu_on_a_machine_without_cuda_refuses(tiny_model) -> None:
    with pytest.raises(DeviceUnavailableError, match="install the CUDA build of torch"):
        ReferenceWorker(ReferenceArgs(str(tiny_model), num_threads=1, num_gpus=1))

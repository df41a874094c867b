"""The weight sync's path, chosen from where the plan places the roles (CPU: gloo; GPUs of
their own: nccl; one shared GPU: cuda_ipc), and the IPC protocol itself over shared host
memory (`shm`, its CPU twin): weights arrive bit for bit, the sync check passes, and the
sender holds a bucket until the receiver acknowledged it. The CUDA IPC handles themselves
are the GPU kit's (bench/sync_case.py, docs/gpu.md)."""

from __future__ import annotations

import datetime
import threading
from pathlib import Path

import pytest
import torch
from weight_sync_pair import send_weights

from rollcli.distributed import stores
from rollcli.distributed.ipc_sync import IpcReceiver, IpcSender
from rollcli.distributed.sync_check import first_difference
from rollcli.distributed.weight_sync import DIRECT_BYTES, choose_backend
from rollcli.models.registry import get_model_spec
from rollcli.planning import PlanInput, RoleRequest, make_plan
from rollcli.planning.ranks import rank_slots

CPU = {"type": "cpu", "node": None, "gpus": []}


def _path(train: str, infer: str, num_gpus: int = 2, nodes: int = 1) -> str:
    """The backend `link` would pick for a plan: each rank's device slot as its worker
    reports it under that placement (Ray's node, the node-local GPU id of its bundle)."""
    roles = [RoleRequest("actor_train", train), RoleRequest("actor_infer", infer)]
    spec = get_model_spec("tiny-random" if num_gpus == 0 else "qwen2.5-0.5b")
    per_node = num_gpus // nodes or None
    plan = make_plan(
        PlanInput(spec, num_gpus=num_gpus, num_nodes=nodes, gpus_per_node=per_node, roles=roles)
    )
    slots = {(s.role, s.rank): s for s in rank_slots(plan)}

    def reported(role: str, rank: int) -> dict:
        if (role, rank) not in slots:
            return CPU
        s = slots[(role, rank)]
        return {"type": "cuda", "node": f"node{s.node}", "gpus": [str(s.gpus[0] % plan.node_size)]}

    infer_ranks = sorted(r for role, r in slots if role == "actor_infer") or [0]
    return choose_backend(
        [reported("actor_train", 0)] + [reported("actor_infer", r) for r in infer_ranks]
    )


def test_the_path_follows_the_placement() -> None:
    assert _path("cpu", "cpu", num_gpus=0) == "gloo"  # a CPU plan: gloo, as before
    assert _path("0", "1") == "nccl"  # GPUs of their own
    assert _path("0", "0", num_gpus=1) == "cuda_ipc"  # colocated on one GPU
    assert _path("0", "1", nodes=2) == "nccl"  # GPU 0 of two nodes: not the same GPU
    assert _path("0", "0-1") == "gloo"  # one receiver shares the sender's GPU, one does not


def test_the_cuda_uuid_tells_one_gpu_from_two() -> None:
    # a tensor-parallel rank's GPU is not Ray's to name (GpuHold): the UUID still is
    seen = {"type": "cuda", "node": "n0", "gpus": [], "uuid": "GPU-aa"}
    assert choose_backend([seen, dict(seen)]) == "cuda_ipc"
    assert choose_backend([seen, {**seen, "uuid": "GPU-bb"}]) == "nccl"
    assert choose_backend([seen, {**seen, "uuid": None}]) == "gloo"  # unknown: the safe path


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    big = DIRECT_BYTES // 4  # float32 elements: this one is a bucket of its own
    return torch.nn.Sequential(torch.nn.Linear(big // 64, 64), torch.nn.Linear(64, 8))


def test_shared_memory_sync_arrives_bit_for_bit_and_verified() -> None:
    source, target = _model(0), _model(1)
    sender, receiver = send_weights(source, target, backend="shm")
    for a, b in zip(source.state_dict().values(), target.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert first_difference(sender.prints, receiver.prints) is None
    assert list(sender.prints) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    cast = _model(2).to(torch.bfloat16)  # an fp32 trainer feeding a bf16 engine
    sender, receiver = send_weights(source, cast, dtype=torch.bfloat16, backend="shm")
    assert torch.equal(cast[0].weight, source[0].weight.to(torch.bfloat16))
    assert receiver.prints == sender.prints
    stale = _model(3)
    sender, receiver = send_weights(source, stale, stale=True, backend="shm")
    assert first_difference(sender.prints, receiver.prints) == "0.weight"  # the check sees it


def test_the_sender_holds_a_bucket_until_the_receiver_acknowledges_it() -> None:
    timeout = datetime.timedelta(seconds=30)
    store = stores.open_store("127.0.0.1", 2, timeout)
    sender = IpcSender(store, 2, torch.device("cpu"))
    receiver = IpcReceiver(
        stores.connect_store("127.0.0.1", store.port, 2, timeout), 1, torch.device("cpu")
    )
    sender.start()
    receiver.start()
    bucket = torch.arange(6, dtype=torch.float32)
    sending = threading.Thread(target=sender.send, args=(bucket,))
    sending.start()
    mapped = receiver.receive(6, torch.float32)
    assert torch.equal(mapped, bucket)
    sending.join(timeout=0.3)
    assert sending.is_alive()  # not acknowledged yet: the bucket is still the sender's
    del mapped
    receiver.release()
    sending.join(timeout=10)
    assert not sending.is_alive()
    assert not store.check(["1/0", "1/0/ack/1"])  # the sync's keys are gone


def test_a_bucket_of_another_layout_is_refused_and_the_sender_times_out() -> None:
    timeout = datetime.timedelta(seconds=1)
    store = stores.open_store("127.0.0.1", 2, timeout)
    sender = IpcSender(store, 2, torch.device("cpu"))
    receiver = IpcReceiver(
        stores.connect_store("127.0.0.1", store.port, 2, timeout), 1, torch.device("cpu")
    )
    sender.start()
    receiver.start()
    failed: list[Exception] = []

    def send() -> None:
        try:
            sender.send(torch.zeros(4))
        except Exception as err:  # the store's timeout: nobody acknowledged
            failed.append(err)

    sending = threading.Thread(target=send)
    sending.start()
    with pytest.raises(RuntimeError, match=r"4 x torch.float32, .* expects 5 x"):
        receiver.receive(5, torch.float32)
    sending.join(timeout=20)
    assert len(failed) == 1 and "ack/1" in str(failed[0])  # no ack: the sync fails, not hangs


def test_between_two_processes_a_real_model_arrives_bit_for_bit(tiny_model, monkeypatch) -> None:
    # the GPU kit's sync case on the CPU: the engine (ActorInferWorker) in a spawned process,
    # the trainer here; gloo, then the IPC protocol over shared memory (shm)
    bench = Path(__file__).resolve().parents[2] / "bench"
    monkeypatch.syspath_prepend(str(bench))  # the spawned process imports sync_case too
    from gpu_proof_cases import Device
    from sync_case import sync_case

    row = sync_case(tiny_model, Device("cpu"), repeats=2)
    assert row["chosen"] == "gloo"  # the same two workers on the CPU: a run stays on gloo
    assert set(row["paths_s"]) == {"gloo", "shm"}
    assert row["bit_exact"] == {"gloo": True, "shm": True}
    assert row["verified"] == {"gloo": True, "shm": True}
    assert len(row["all_s"]["gloo"]) == 1 and len(row["all_s"]["shm"]) == 2
    assert all(min(t) > 0 for t in row["all_s"].values())

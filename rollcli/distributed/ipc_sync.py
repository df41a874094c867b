"""The weight sync's buckets handed over as shared-memory handles, not sent: colocated roles.

When actor_train and actor_infer hold their weights on the same GPU, NCCL cannot join them
(it refuses two ranks on one device) and gloo copies every bucket GPU -> host -> GPU: 10.2 s
for qwen2.5-3b's 5.7 GiB on an H200. Here the sender exports each bucket as a CUDA IPC
handle (torch's own `reduce_tensor`: the bucket's allocation, its offset, an event to wait
on), the receivers map that same GPU memory and copy from it into their model: one
device-to-device copy per receiver, no host memory. verl and slime hand colocated engines
their weights the same way.

The protocol (`IpcSender` / `IpcReceiver`), over the sync group's TCP store (stores.py),
which already joins both sides and carries only the few hundred bytes of each handle:

1. the sender writes bucket `i` of sync `n` (a flat tensor of one dtype, weight_sync.py's
   buckets), waits for the device to finish writing it, and sets key `n/i` to its handle;
2. each receiver `r` waits for `n/i`, rebuilds the tensor from the handle, copies it into
   its model (or hands it to its engine's loader), drops it, and sets `n/i/ack/r`;
3. the sender waits for every receiver's ack before it lets the bucket go (and deletes the
   keys): a bucket is never freed or rewritten while a receiver reads it, and at most one
   bucket (BUCKET_BYTES, or one tensor of its own) is alive beyond the model.

The same protocol runs over shared host memory (backend `shm`), which is how it is tested
without a GPU: a CPU bucket is written into a storage shared by file name (torch's
`file_system` sharing, `rebuild_storage_filename`), which any process on the node can map.
It is never chosen for a run (on CPU the sync stays gloo); `weight_sync.choose_backend`
picks `cuda_ipc` for GPUs that the sender and every receiver share.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch

IPC_BACKENDS = ("cuda_ipc", "shm")


def ipc_device(backend: str) -> torch.device:
    """Where an IPC sync's buckets live: this process's GPU (`cuda_ipc`) or the host (`shm`)."""
    if backend == "shm":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(
            "the cuda_ipc weight sync needs CUDA on both sides; weight_sync.choose_backend "
            "picks it only for roles that share a GPU (on CPU the sync is gloo)"
        )
    return torch.device("cuda", torch.cuda.current_device())


def share(tensor: torch.Tensor) -> bytes:
    """A handle another process on this node turns back into `tensor`'s memory (`rebuild`):
    CUDA: torch's IPC reduction; CPU: `tensor` must live in `shared_empty`'s memory."""
    if tensor.is_cuda:
        from torch.multiprocessing.reductions import reduce_tensor

        fn, args = reduce_tensor(tensor)
        return pickle.dumps((fn, args))
    manager, name, size = tensor.untyped_storage()._share_filename_cpu_()
    offset = tensor.storage_offset()
    return pickle.dumps((_host_tensor, (manager, name, size, tensor.dtype, offset, tensor.numel())))


def rebuild(handle: bytes) -> torch.Tensor:
    """The tensor a `share` handle stands for, mapped (not copied) into this process."""
    fn, args = pickle.loads(handle)  # noqa: S301 (the run's own store, as gloo's payloads)
    return fn(*args)


def shared_empty(numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialised flat tensor that `share` can hand over: any CUDA tensor can; on the
    host, one in a storage shared by file name (visible to every process of the node)."""
    if device.type == "cuda":
        return torch.empty(numel, dtype=dtype, device=device)
    storage = torch.UntypedStorage._new_using_filename_cpu(numel * dtype.itemsize)
    return torch.empty(0, dtype=dtype).set_(storage, 0, (numel,), (1,))


def _host_tensor(
    manager: bytes, name: bytes, size: int, dtype: torch.dtype, offset: int, numel: int
) -> torch.Tensor:
    from torch.multiprocessing.reductions import rebuild_storage_filename

    storage = rebuild_storage_filename(torch.UntypedStorage, manager, name, size)
    return torch.empty(0, dtype=dtype).set_(storage, offset, (numel,), (1,))


def _ack(key: str, rank: int) -> str:
    return f"{key}/ack/{rank}"


class IpcSender:
    """Rank 0's side: each bucket handed over (`send`), kept alive until every receiver
    acknowledged it. `store`: the sync group's (rank 0 holds it)."""

    def __init__(self, store: Any, world_size: int, device: torch.device) -> None:
        self.store, self.world_size, self.device = store, world_size, device
        self.sync = 0  # syncs so far: keys of one sync never meet another's
        self.bucket = 0

    def start(self) -> None:
        self.sync, self.bucket = self.sync + 1, 0

    def send(self, flat: torch.Tensor) -> None:
        """Hand `flat` (on this sender's device) to every receiver; returns once they all
        copied it. A host tensor is first copied into shared memory."""
        if flat.device.type != "cuda":
            shared = shared_empty(flat.numel(), flat.dtype, flat.device)
            flat = shared.copy_(flat)
        else:
            torch.cuda.current_stream(flat.device).synchronize()  # written before it is read
        key = f"{self.sync}/{self.bucket}"
        self.bucket += 1
        self.store.set(key, share(flat))
        acks = [_ack(key, r) for r in range(1, self.world_size)]
        self.store.wait(acks)  # the store's timeout bounds a receiver that died
        for k in (key, *acks):
            self.store.delete_key(k)
        del flat

    def finish(self) -> None:
        """After a sync: CUDA blocks the receivers released go back to the allocator."""
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()


class IpcReceiver:
    """Rank `rank`'s side: each bucket mapped from its handle (`receive`), acknowledged once
    the caller is done with it (`release`)."""

    def __init__(self, store: Any, rank: int, device: torch.device) -> None:
        self.store, self.rank, self.device = store, rank, device
        self.sync = 0
        self.bucket = 0
        self.held: str | None = None  # the key of the bucket mapped and not yet released

    def start(self) -> None:
        self.sync, self.bucket = self.sync + 1, 0

    def receive(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        """The next bucket, mapped from the sender's memory (read it, then `release`)."""
        key = f"{self.sync}/{self.bucket}"
        self.bucket += 1
        self.store.wait([key])
        flat = rebuild(self.store.get(key))
        if flat.numel() != numel or flat.dtype != dtype:
            raise RuntimeError(
                f"weight sync bucket {key}: the sender's is {flat.numel()} x {flat.dtype}, this "
                f"receiver's model expects {numel} x {dtype}; both sides must hold one model"
            )
        self.held = key
        return flat

    def release(self) -> None:
        """Acknowledge the bucket last received, once every copy out of it is made (the
        caller keeps no view of it): the sender may then free or rewrite that memory."""
        if self.held is None:
            return
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()  # our copies read it all
        self.store.set(_ack(self.held, self.rank), b"1")
        self.held = None

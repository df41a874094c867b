"""Send weights from actor_train (rank 0) to actor_infer workers (ranks 1..N) by broadcast.

A dedicated process group is built from a TCP store, independent of any training process
group. Tensors travel in flat buckets of one dtype, in the model's `state_dict` order, with
tied weights sent once, cast to the receivers' dtype (`link` asks them: an fp32 trainer
feeding a bf16 engine sends bf16). The backend (`choose_backend`): `nccl` (nccl_sync.py) when the
sender and every receiver hold their weights on GPUs of their own, buckets then staying on
the GPU; else `gloo`, which works for any devices: a CUDA model's buckets are copied to host
memory to be sent, and received buckets are copied into the receiver's tensors wherever
they live. (NCCL cannot join two ranks on one GPU, which colocated roles share.) When the
sender and every receiver share one GPU, `cuda_ipc` (ipc_sync.py): no group; each bucket is
handed over as a CUDA IPC handle through the group's store and copied device to device
(`shm`: the same protocol over shared host memory, which tests it on CPU).

A receiver copies into its own model's tensors in place (the `hf` engine), or hands a
stream of `(name, tensor)` pairs to a `load` function (the `vllm` engine's `load_weights`);
then its model only gives the layout (names, shapes, dtypes) and may live on the meta device.
The stream is lazy: each bucket is broadcast when `load` reaches it, so at most the buckets
`load` still holds are in memory.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.distributed as dist

from rollcli.distributed import stores
from rollcli.distributed.ipc_sync import (
    IPC_BACKENDS,
    IpcReceiver,
    IpcSender,
    ipc_device,
)
from rollcli.distributed.sync_check import Print, tensor_print

BUCKET_BYTES = 256 * 1024 * 1024
# A tensor this large travels alone, straight from the sender's tensor and (when the receiver
# loads in place) straight into the receiver's: no bucket to fill on either side.
DIRECT_BYTES = 1024 * 1024


LoadFn = Callable[[Iterator[tuple[str, torch.Tensor]]], None]
# (name, the sender's tensor) -> the tensor to send in its place (same shape and dtype)
ValueFn = Callable[[str, torch.Tensor], torch.Tensor]


def _unique_tensors(
    model: torch.nn.Module | Mapping[str, torch.Tensor],
) -> list[tuple[list[str], torch.Tensor]]:
    """Each tensor once, in `state_dict` order, with all its names (tied weights have two).

    Tied tensors are the same object; objects, unlike storage pointers, also tell tensors
    apart on the meta device (where every pointer is 0).
    """
    names: dict[int, list[str]] = {}
    out = []
    state = model if isinstance(model, Mapping) else model.state_dict(keep_vars=True)
    for name, tensor in state.items():
        key = id(tensor) if tensor.is_meta else tensor.data_ptr()
        if key not in names:
            names[key] = []
            out.append((names[key], tensor))
        names[key].append(name)
    return out


def _buckets(
    tensors: list[tuple[list[str], torch.Tensor]], dtype: torch.dtype | None = None
) -> Iterator[list[tuple[list[str], torch.Tensor]]]:
    """Buckets of one dtype up to BUCKET_BYTES, as the tensors would be in `dtype` (their
    own when None): a sender casting to the receivers' dtype cuts the same buckets. A tensor
    of DIRECT_BYTES or more is a bucket of its own."""
    bucket: list[tuple[list[str], torch.Tensor]] = []
    size = 0
    for names, t in tensors:
        nbytes = t.numel() * (dtype or t.dtype).itemsize
        if nbytes >= DIRECT_BYTES:
            if bucket:
                yield bucket
                bucket, size = [], 0
            yield [(names, t)]
            continue
        if bucket and (
            size + nbytes > BUCKET_BYTES or (dtype is None and t.dtype != bucket[0][1].dtype)
        ):
            yield bucket
            bucket, size = [], 0
        bucket.append((names, t))
        size += nbytes
    if bucket:
        yield bucket


def choose_backend(slots: list[dict[str, Any]]) -> str:
    """The sync's path from where each side holds its weights (`device_slot()` of the
    sender, then of each receiver): `cuda_ipc` when all are on one and the same GPU
    (colocated roles), `nccl` when all are on CUDA and no two share a GPU, else `gloo` (any
    CPU side, GPUs partly shared, or a GPU not identified). A GPU is known by the CUDA UUID
    the worker reports, else by its node and the GPU ids Ray assigned it.

    >>> cpu = {"type": "cpu", "node": None, "gpus": []}
    >>> choose_backend([cpu, cpu])
    'gloo'
    >>> gpu = lambda i: {"type": "cuda", "node": "n0", "gpus": [str(i)]}
    >>> choose_backend([gpu(0), gpu(1)]), choose_backend([gpu(0), gpu(0)])
    ('nccl', 'cuda_ipc')
    """
    if not all(s["type"] == "cuda" for s in slots):
        return "gloo"
    places = [_gpu_identity(s) for s in slots]
    if any(p is None for p in places):
        return "gloo"  # unknown GPUs: neither NCCL (duplicates) nor IPC (same GPU) is sure
    if len(set(places)) == 1:
        return "cuda_ipc"
    flat = [(node, g) for node, gpus in places for g in gpus]
    if len(flat) != len(set(flat)):
        return "gloo"  # some, not all, share a GPU: NCCL refuses duplicate GPUs
    return "nccl"


def _gpu_identity(slot: dict[str, Any]) -> tuple[Any, tuple[str, ...]] | None:
    """(node, GPUs) that tell two workers' devices apart: the CUDA UUID where reported (one
    physical GPU, whatever CUDA_VISIBLE_DEVICES calls it), else Ray's node and GPU ids."""
    if slot.get("uuid"):
        return ("uuid", (slot["uuid"],))
    if not slot["gpus"]:
        return None
    return (slot["node"], tuple(slot["gpus"]))


def _new_group(store: Any, rank: int, world_size: int, timeout: datetime.timedelta, backend: str):  # noqa: ANN202
    """The group and the device its buckets live on (an IPC sync has no group)."""
    if backend in IPC_BACKENDS:
        return None, ipc_device(backend)
    if backend == "nccl":
        from rollcli.distributed.nccl_sync import nccl_group

        return nccl_group(store, rank, world_size, timeout)
    if backend != "gloo":
        raise ValueError(f"weight sync backend {backend!r}: use gloo, nccl, cuda_ipc or shm")
    return dist.ProcessGroupGloo(store, rank, world_size, timeout), torch.device("cpu")


def _broadcast(group: dist.ProcessGroup, tensor: torch.Tensor) -> None:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    group.broadcast([tensor], opts).wait()


class WeightSender:
    """Rank 0 of the sync group (lives in actor_train). It opens the group's store on a port
    the kernel picks (`self.port`, for the receivers; see stores.py); `connect` then waits
    for the receivers. `dtype`: the receivers' weight dtype, which each tensor is cast to
    (a bf16 engine fed by an fp32 trainer); None sends the model's own dtypes."""

    def __init__(
        self,
        host: str,
        world_size: int,
        timeout_s: float = 600,
        backend: str = "gloo",
        dtype: torch.dtype | None = None,
    ) -> None:
        self.dtype = dtype
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.world_size = world_size
        self.backend = backend
        self.device = torch.device("cpu")
        self.store = stores.open_store(host, world_size, self.timeout)
        self.port: int = self.store.port
        self.group: dist.ProcessGroup | None = None
        self.ipc: IpcSender | None = None
        self.prints: dict[str, Print] = {}  # of the last send (`sync_check`)
        self.check_s = 0.0

    def connect(self) -> None:
        self.group, self.device = _new_group(
            self.store, 0, self.world_size, self.timeout, self.backend
        )
        if self.backend in IPC_BACKENDS:
            self.ipc = IpcSender(self.store, self.world_size, self.device)

    @torch.no_grad()
    def send(
        self, model: torch.nn.Module | Mapping[str, torch.Tensor], value: ValueFn | None = None
    ) -> float:
        """Send `model`'s tensors (or a `state_dict`-like mapping's): broadcast, or handed
        over bucket by bucket as IPC handles; `value` gives what to send for a tensor (LoRA:
        the merged weight), computed as its bucket is built."""
        assert self.group is not None or self.ipc is not None, "connect() was not called"
        start = time.perf_counter()
        self.prints, self.check_s = {}, 0.0
        if self.ipc is not None:
            self.ipc.start()
        for bucket in _buckets(_unique_tensors(model), self.dtype):
            tensors = [value(ns[0], t) if value else t for ns, t in bucket]
            # gloo: a CUDA model's bucket goes through host memory; nccl: it stays on the GPU
            parts = [t.detach().reshape(-1).to(self.dtype or t.dtype) for t in tensors]
            flat = parts[0] if len(parts) == 1 else torch.cat(parts)  # alone: no copy
            flat = flat.to(self.device).contiguous()
            if self.ipc is not None:  # handed over; back once every receiver copied it
                self.ipc.send(flat)
            else:
                _broadcast(self.group, flat)
            del flat
            t0 = time.perf_counter()
            self.prints.update(
                (ns[0], tensor_print(p)) for (ns, _), p in zip(bucket, parts, strict=True)
            )
            self.check_s += time.perf_counter() - t0
        if self.ipc is not None:
            self.ipc.finish()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - start


class WeightReceiver:
    """Ranks 1..N of the sync group (one per actor_infer worker)."""

    def __init__(
        self,
        host: str,
        port: int,
        rank: int,
        world_size: int,
        timeout_s: float = 600,
        backend: str = "gloo",
    ) -> None:
        timeout = datetime.timedelta(seconds=timeout_s)
        store = stores.connect_store(host, port, world_size, timeout)
        self.group, self.device = _new_group(store, rank, world_size, timeout, backend)
        self.ipc = IpcReceiver(store, rank, self.device) if backend in IPC_BACKENDS else None
        self.prints: dict[str, Print] = {}  # of the last receive (`sync_check`)
        self.check_s = 0.0

    @torch.no_grad()
    def receive(
        self, model: torch.nn.Module, load: LoadFn | None = None, stale: bool = False
    ) -> float:
        """Receive into `model`'s tensors in place; or, given `load`, call it once with the
        stream of received `(name, tensor)` pairs and leave `model` as it is. The stream names
        a tied tensor under each of its names: an engine may keep a copy per name (vLLM's
        CPU LM head packs its own). `self.prints` then holds each tensor's fingerprint as the
        model holds it (in place) or as it arrived (`load`), for `sync_check`; `stale` leaves
        the first tensor as it was (fault injection: a sync that goes wrong)."""
        start = time.perf_counter()
        # (a stale sync on purpose receives into buffers: in place, a tensor would arrive)
        in_place = load is None and not stale and self.ipc is None  # IPC: copied from the handle
        if self.ipc is not None:
            self.ipc.start()
        stream = self._stream(model, in_place=in_place)
        self.prints, self.check_s = {}, 0.0
        if load is None:
            for i, (names, tensor, new) in enumerate(stream):
                if new.data_ptr() != tensor.data_ptr() and not (stale and i == 0):
                    tensor.data.copy_(new)  # into the model's tensor (else it came in place)
                self._print(names[0], tensor)  # as the model now holds it
        else:

            def loaded() -> Iterator[tuple[str, torch.Tensor]]:
                for names, _, new in stream:
                    self._print(names[0], new)  # as it arrived
                    yield from ((name, new) for name in names)

            load(loaded())
            left = sum(1 for _ in stream)  # drain: the sender must not wait on us forever
            if left:
                raise RuntimeError(f"weight load stopped early: {left} tensors were not read")
        return time.perf_counter() - start

    def _print(self, name: str, tensor: torch.Tensor) -> None:
        t0 = time.perf_counter()
        self.prints[name] = tensor_print(tensor)
        self.check_s += time.perf_counter() - t0

    def _stream(
        self, model: torch.nn.Module, in_place: bool = False
    ) -> Iterator[tuple[list[str], torch.Tensor, torch.Tensor]]:
        """`(names, model's tensor, received tensor)`, broadcasting a bucket when reached;
        `in_place`: a tensor that travels alone is received into the model's tensor itself
        where it can be (then both are the same tensor)."""
        for bucket in _buckets(_unique_tensors(model)):
            (names, first), dtype = bucket[0], bucket[0][1].dtype
            if in_place and len(bucket) == 1 and _receivable(first, self.device):
                _broadcast(self.group, first.data.view(-1))  # straight into the model
                yield names, first, first.data
                continue
            numel = sum(t.numel() for _, t in bucket)
            if self.ipc is not None:
                flat = self.ipc.receive(numel, dtype)  # the sender's memory, mapped
            else:
                flat = torch.empty(numel, dtype=dtype, device=self.device)
                _broadcast(self.group, flat)
            offset = 0
            for names, tensor in bucket:
                yield names, tensor, flat[offset : offset + tensor.numel()].view(tensor.shape)
                offset += tensor.numel()
            if self.ipc is not None:  # copied or loaded: the sender may let the bucket go
                del flat
                self.ipc.release()


def _receivable(tensor: torch.Tensor, device: torch.device) -> bool:
    """Whether a broadcast can write into `tensor` itself: contiguous, on the group's
    device (the host for gloo, the GPU for nccl), not the meta device."""
    same = tensor.device.type == device.type
    if device.index is not None:
        same = same and tensor.device.index == device.index
    return same and tensor.is_contiguous() and not tensor.is_meta


def link(actor_train: Any, actor_infer: Any) -> tuple[str, str]:
    """Join actor_train's rank 0 (sender) and every actor_infer worker (receivers) in one
    weight-sync group; returns its backend (`choose_backend` over where each side's weights
    live) and the `host:port` they met at: the sender's node (which may not be the
    receivers') and the port its store took. Both arguments are `Cluster`s."""
    import ray

    world = 1 + actor_infer.world_size
    sender = actor_train.workers[0]
    workers = [sender, *actor_infer.workers]
    backend = choose_backend(ray.get([w.device_slot.remote() for w in workers]))
    dtypes = set(ray.get([w.weight_dtype.remote() for w in actor_infer.workers]))
    if len(dtypes) != 1:
        raise RuntimeError(f"actor_infer workers hold weights of different dtypes: {dtypes}")
    host, port = ray.get(sender.open_weight_sync.remote(world, backend, dtypes.pop()))
    refs = [sender.connect_weight_sync.remote()]
    refs += [
        w.init_weight_sync.remote(host, port, rank + 1, world, backend)
        for rank, w in enumerate(actor_infer.workers)
    ]
    ray.get(refs)
    return backend, f"{host}:{port}"

"""The GPU kit's `sync` case: the weight sync from trainer to engine over each path, between
two processes, as colocated roles run it.

actor_train (`ActorTrainWorker`) lives in the kit's process; actor_infer (`ActorInferWorker`,
hf engine) in a process of its own (torch multiprocessing: CUDA IPC cannot open a handle in
the process that made it, and the kit has no Ray), spawned on a GPU and on the CPU alike:
CUDA does not survive a fork, and on the CPU a fork of a process whose threads hold locks
(OpenMP, gloo, a test suite's earlier work) hung the child for 600 s on CI, where a spawned
one spends ~5 s importing torch and roll. A child that dies is reported at once, not after
the wait. Both on one device: the GPU, or the CPU. Each path is linked as a run links it
(`open_weight_sync` / `init_weight_sync`) and timed: `gloo` (buckets through host memory: today's colocated path, once: 10 s for a 3B
model) and the IPC path (`cuda_ipc` on a GPU, its host twin `shm` on the CPU) `repeats`
times (the first maps each handle anew). After each path the
engine's weights are compared bit for bit (a sha256 per tensor) with the trainer's, cast to
the engine's dtype, and the sync check (`distributed/sync_check.py`) is asked as a run asks
it. `chosen` is what `weight_sync.choose_backend` picks for the two workers' device slots:
`cuda_ipc` on one GPU (the CUDA UUIDs agree), `gloo` on the CPU.

The CPU suite runs this case on the tiny model (tests/distributed/test_ipc_sync.py).
"""

from __future__ import annotations

import hashlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import torch

WAIT_S = 600  # a reply the engine's process owes; it loads a model first


def tensor_digests(model: torch.nn.Module, dtype: torch.dtype | None = None) -> dict[str, str]:
    """sha256 of every `state_dict` tensor's bytes (cast to `dtype` first when given)."""
    out = {}
    for name, t in model.state_dict().items():
        t = t.detach().to(dtype or t.dtype).contiguous().cpu()
        out[name] = hashlib.sha256(t.reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()
    return out


def engine_process(conn: Any, folder: str, num_gpus: float, dtype: str) -> None:
    """The engine's process: an ActorInferWorker answering the kit's messages."""
    try:
        from rollcli.workers.actor_infer import ActorInferArgs, ActorInferWorker

        infer = ActorInferWorker(
            ActorInferArgs(folder, engine="hf", dtype=dtype, num_gpus=num_gpus)
        )
        conn.send(("ok", infer.device_slot()))
        while True:
            msg = conn.recv()
            if msg[0] == "init":
                infer.init_weight_sync(*msg[1:])
                conn.send(("ok", None))
            elif msg[0] == "receive":
                took = infer.receive_weights()
                conn.send(("ok", (took, infer.received_prints()["prints"])))
            elif msg[0] == "digests":
                conn.send(("ok", tensor_digests(infer.model)))
            else:
                conn.send(("ok", None))
                return
    except Exception:  # the kit's process reports it
        conn.send(("error", traceback.format_exc()[-3000:]))


def _reply(conn: Any, engine: Any) -> Any:
    waited = 0.0
    while not conn.poll(1.0):
        waited += 1.0
        if not engine.is_alive():
            raise RuntimeError(f"the engine's process died (exit code {engine.exitcode})")
        if waited >= WAIT_S:
            raise TimeoutError(f"the engine's process did not answer within {WAIT_S} s")
    status, value = conn.recv()
    if status != "ok":
        raise RuntimeError(f"the engine's process failed:\n{value}")
    return value


def sync_case(folder: Path, device: Any, repeats: int = 3) -> dict[str, Any]:
    """One row: each path's sync times (`paths_s`: the fastest, `all_s`: every one),
    whether the weights arrived bit for bit (`bit_exact`) and the check passed
    (`verified`), per path; `device` is gpu_proof_cases' `Device`."""
    import torch.multiprocessing as mp

    from rollcli.distributed.sync_check import first_difference
    from rollcli.distributed.weight_sync import choose_backend
    from rollcli.strategies.precision import torch_dtype
    from rollcli.strategies.trainer import TrainerArgs
    from rollcli.workers.actor_train import ActorTrainWorker
    from rollcli.workers.trained_model import TrainedModelArgs

    ctx = mp.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    engine = ctx.Process(
        target=engine_process,
        args=(child_conn, str(folder), device.num_gpus, device.infer_dtype),
        daemon=True,
    )
    engine.start()
    try:
        train = ActorTrainWorker(
            TrainedModelArgs(
                str(folder),
                trainer=TrainerArgs(lr=1e-6),
                precision=device.train_precision,
                num_gpus=device.num_gpus,
            )
        )
        slots = [train.device_slot(), _reply(conn, engine)]
        expected = tensor_digests(train.model, torch_dtype(device.infer_dtype))
        ipc = "cuda_ipc" if device.kind == "cuda" else "shm"
        row: dict[str, Any] = {"case": "sync", "chosen": choose_backend(slots)}
        row["all_s"], row["bit_exact"], row["verified"] = {}, {}, {}
        for path in ("gloo", ipc):
            _link(train, conn, engine, path, device.infer_dtype)
            times = []
            for _ in range(repeats if path == ipc else 1):
                took, held = _one_sync(train, conn, engine, device)
                times.append(took)
            sent = train.sent_prints()["prints"]
            row["all_s"][path] = times
            row["verified"][path] = first_difference(sent, held) is None
            conn.send(("digests",))
            row["bit_exact"][path] = _reply(conn, engine) == expected
        row["paths_s"] = {path: min(t) for path, t in row["all_s"].items()}
        row["weight_gib"] = (
            sum(
                p.numel() * torch_dtype(device.infer_dtype).itemsize
                for p in train.model.parameters()
            )
            / 1024**3
        )
        return row
    finally:
        conn.send(("stop",))
        engine.join(timeout=30)
        if engine.is_alive():
            engine.kill()


def _link(train: Any, conn: Any, engine: Any, backend: str, dtype: str) -> None:
    """Join the trainer (sender) and the engine's process (receiver) over `backend`."""
    host, port = train.open_weight_sync(2, backend, dtype)
    conn.send(("init", host, port, 1, 2, backend))
    train.connect_weight_sync()  # gloo: meets the receiver's group; IPC: no group
    _reply(conn, engine)


def _one_sync(train: Any, conn: Any, engine: Any, device: Any) -> tuple[float, dict]:
    """One sync, timed from the trainer's side until the engine holds the weights."""
    device.sync()
    start = time.perf_counter()
    conn.send(("receive",))
    sent: list[float] = []
    sender = threading.Thread(target=lambda: sent.append(train.broadcast_weights()))
    sender.start()
    _, held = _reply(conn, engine)
    sender.join()
    device.sync()
    if not sent:
        raise RuntimeError("the weight sync's sender failed")
    return time.perf_counter() - start, held

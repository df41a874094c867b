"""A weight-sync sender and one receiver in this process (the receiver's side runs in a
thread, as it would in its own worker), for tests of what a sync delivers."""

from __future__ import annotations

import threading
from typing import Any

import torch

from rollcli.distributed.weight_sync import WeightReceiver, WeightSender


def send_weights(
    source: Any,
    target: torch.nn.Module,
    dtype: torch.dtype | None = None,
    stale: bool = False,
    backend: str = "gloo",
) -> tuple[WeightSender, WeightReceiver]:
    """Connect a sender (casting to `dtype`) and a receiver over `backend`, and sync `source`
    (a model or a state_dict-like mapping) into `target` in place (`stale`: the receiver
    leaves its first tensor as it was); returns both ends (their `prints`)."""
    sender = WeightSender("127.0.0.1", 2, dtype=dtype, backend=backend)
    receiver: list[WeightReceiver] = []
    joined = threading.Thread(
        target=lambda: receiver.append(
            WeightReceiver("127.0.0.1", sender.port, 1, 2, backend=backend)
        )
    )
    joined.start()
    sender.connect()
    joined.join()
    received = threading.Thread(target=lambda: receiver[0].receive(target, stale=stale))
    received.start()
    sender.send(source)
    received.join()
    return sender, receiver[0]


def sync_into_worker(worker: Any, source: Any) -> float:
    """Sync `source` (a model) into an ActorInferWorker through its own receiver, as a run
    does (`init_weight_sync`, then `receive_weights`); returns the sync's reported time."""
    sender = WeightSender("127.0.0.1", 2)
    joined = threading.Thread(target=worker.init_weight_sync, args=("127.0.0.1", sender.port, 1, 2))
    joined.start()
    sender.connect()
    joined.join()
    took: list[float] = []
    received = threading.Thread(target=lambda: took.append(worker.receive_weights()))
    received.start()
    sender.send(source)
    received.join()
    return took[0]

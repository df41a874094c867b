"""Every weight sync verified: after actor_train sends its weights, each actor_infer rank's
fingerprints of what it holds are compared with the sender's (`distributed/sync_check.py`).
A mismatch would have the engine sample from weights the trainer no longer has, for the
rest of the run: it is an error event that stops the run (`WeightSyncError`), or, with
`run.sync_retry: true`, the sync is made once more first. The step logs `sync/verified` (1
when verified) and `time/sync_check_s` (the slowest side's fingerprint time)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rollcli.distributed.calls import get, submit
from rollcli.distributed.sync_check import first_difference
from rollcli.workers.actor_infer import ActorInferWorker
from rollcli.workers.actor_train import ActorTrainWorker

if TYPE_CHECKING:
    from rollcli.runtime.workers_setup import Clusters


class WeightSyncError(RuntimeError):
    """A weight sync left an engine's weights unlike the trainer's."""


def send_weights(clusters: Clusters, stale: bool = False) -> None:
    """One weight sync: actor_train's rank 0 broadcasts, every actor_infer rank receives
    (`stale`: the first rank leaves a tensor as it was, a fault injected on purpose)."""
    refs = clusters.actor_train.call_async(ActorTrainWorker.broadcast_weights)
    refs += [
        submit(worker, ActorInferWorker.receive_weights, stale=stale and rank == 0)
        for rank, worker in enumerate(clusters.actor_infer.workers)
    ]
    get(refs)


def sync_mismatch(clusters: Clusters) -> tuple[str | None, float]:
    """(a line naming the first actor_infer rank and tensor that differ from what was sent,
    or None; the fingerprints' time, the slowest side's)."""
    sent = clusters.actor_train.call_rank(0, ActorTrainWorker.sent_prints)
    held = clusters.actor_infer.call(ActorInferWorker.received_prints)
    check_s = max([sent["check_s"], *(h["check_s"] for h in held)])
    for rank, one in enumerate(held):
        name = first_difference(sent["prints"], one["prints"])
        if name is not None:
            return f"actor_infer rank {rank}'s {name} is not actor_train's", check_s
    return None, check_s


def verified_sync(
    clusters: Clusters, version: int, retry: bool, log_event: Callable[[str], None], stale: bool
) -> dict[str, float]:
    """Sync the weights after step `version` and verify them (see the module docstring);
    returns the step's `sync/*` and `time/sync_check_s` metrics."""
    send_weights(clusters, stale=stale)
    problem, check_s = sync_mismatch(clusters)
    if problem is not None and retry:
        log_event(
            f"warning: the weight sync after step {version} failed its check ({problem}); "
            "syncing once more (run.sync_retry)"
        )
        send_weights(clusters)
        problem, again = sync_mismatch(clusters)
        check_s += again
    if problem is not None:
        message = (
            f"the weight sync after step {version} failed its check: {problem}, so the "
            "engine would sample from stale weights; the run stopped (`roll resume` "
            "continues from the newest checkpoint; run.sync_retry=true tries a sync twice)"
        )
        log_event(f"error: {message}")
        raise WeightSyncError(message)
    return {"sync/verified": 1.0, "time/sync_check_s": check_s}

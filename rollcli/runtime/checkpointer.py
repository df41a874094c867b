"""A run's checkpoints: writing one (the trained model, the stateful roles' optimizer states,
every process's RNG and the driver's own state) and loading one into fresh workers.

`write_checkpoint` (runs/checkpoint.py) fills a temporary folder and renames it, so the
newest checkpoint is never half-written. The pipelines call `save` and `restore` through
their `RunControl` (`ctl.checkpoints`); the driver's recovery restores the newest one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from rollcli.distributed.calls import get, submit
from rollcli.distributed.cluster import Cluster
from rollcli.distributed.process_control import ProcessControl
from rollcli.runs.checkpoint import load_tensors_file, read_state, write_checkpoint
from rollcli.runs.faults import FaultInjector
from rollcli.runs.rng import capture_rng, restore_rng
from rollcli.runs.run_dir import RunDir
from rollcli.runtime.display_protocol import Display
from rollcli.workers.trained_model import TrainedModelWorker

RNG_FILE = "rng.pt"  # the driver's generators and every worker's, per role and rank


class Stateful(Protocol):
    """A trained role's worker (actor_train, critic): what a checkpoint saves and loads of
    it beside the model (optimizer, scheduler, ...)."""

    def save_state(self, folder: str) -> None: ...

    def load_state(self, folder: str) -> None: ...


class Checkpointer:
    """`clusters()`: the running clusters, the trained one first; `tracker()`: the run's
    trackers (rewound with the run folder), or None."""

    def __init__(
        self,
        run: RunDir,
        keep_last: int,
        display: Display,
        faults: FaultInjector,
        clusters: Callable[[], list[Cluster]],
        tracker: Callable[[], Any],
    ) -> None:
        self.run = run
        self.keep_last = keep_last
        self.ui = display
        self.faults = faults
        self.clusters = clusters
        self.tracker = tracker

    def save(
        self,
        step: int,
        driver_state: dict[str, Any],
        stateful: list[Cluster] | None = None,
        driver_files: dict[str, Any] | None = None,
    ) -> None:
        """The trained worker's model (a Hugging Face folder), the state (optimizer, ...) of
        the `stateful` clusters (default: the trained one), every process's RNG, and
        `driver_state` (with the step and the metrics lines so far; JSON) and `driver_files`
        (file name -> any picklable object, written with `torch.save`)."""
        self.ui.phase("saving checkpoint")
        clusters = self.clusters()
        trained = clusters[0]
        stateful = stateful or clusters[:1]

        def fill(folder: Path) -> None:
            # every rank: rank 0 writes, data-parallel ranks join its collectives (ZeRO-3)
            refs = trained.call_async(TrainedModelWorker.save_pretrained, str(folder))
            for c in stateful:
                refs += c.call_async(Stateful.save_state, str(folder))
            get(refs)
            rng = {"driver": capture_rng()}
            rng.update({c.name: c.call(ProcessControl.rng_state) for c in clusters})
            torch.save(rng, folder / RNG_FILE)
            for name, obj in (driver_files or {}).items():
                torch.save(obj, folder / name)

        state = {"step": step, **driver_state, "metrics_lines": len(self.run.read_metrics())}
        path = write_checkpoint(
            self.run.checkpoints,
            step,
            fill,
            state,
            self.keep_last,
            before_rename=lambda: self.faults.hit("checkpoint", step),
        )
        self.run.log_event(f"checkpoint written: {path}")

    def restore(
        self, checkpoint: Path | None, stateful: list[Cluster] | None = None
    ) -> dict[str, Any] | None:
        """Load `checkpoint` into the (fresh) workers (the `stateful` clusters' state, default
        the trained one's) and the driver's RNG, rewind the run folder; returns the driver
        state saved with it (None: from the start)."""
        if checkpoint is None:
            self.run.rewind(0, 0)
            return None
        self.ui.phase(f"loading checkpoint {checkpoint.name}")
        clusters = self.clusters()
        state = read_state(checkpoint)
        refs = []
        for c in stateful or clusters[:1]:
            refs += c.call_async(Stateful.load_state, str(checkpoint))
        get(refs)
        rng = load_tensors_file(checkpoint / RNG_FILE)
        restore_rng(rng["driver"])
        refs = []
        for cluster in clusters:
            for worker, worker_rng in zip(cluster.workers, rng[cluster.name], strict=True):
                refs.append(submit(worker, ProcessControl.load_rng_state, worker_rng))
        get(refs)
        self.run.rewind(state["step"], state["metrics_lines"])
        tracker = self.tracker()
        if tracker is not None:
            tracker.rewind(state["step"])
        return state

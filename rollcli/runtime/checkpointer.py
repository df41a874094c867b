"""A run's checkpoints: writing one (the trained model, the stateful roles' optimizer states,
every process's RNG and the driver's own state) and loading one into fresh workers.

`write_checkpoint` (runs/checkpoint.py) fills a temporary folder and renames it, so the
newest checkpoint is never half-written. Before each write the disk must have room for one
more checkpoint of the size of the last (`runs/disk_space.py`: else `DiskFullError` stops the
run, nothing written); after it, a warning goes to events.log and the screen when the next
one will not fit. With `run.keep_optimizer: last` the older checkpoints drop their optimizer
states once the new one is in place (`runs/optimizer_states.py`). The pipelines call `save` and `restore` through
their `RunControl` (`ctl.checkpoints`); the driver's recovery restores the newest one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from rollcli.config.errors import ConfigError
from rollcli.distributed.calls import get, submit
from rollcli.distributed.cluster import Cluster
from rollcli.distributed.process_control import ProcessControl
from rollcli.runs.checkpoint import (
    complete_checkpoints,
    load_tensors_file,
    read_state,
    write_checkpoint,
)
from rollcli.runs.disk_space import check_room, gb, low_space_warning
from rollcli.runs.faults import FaultInjector
from rollcli.runs.optimizer_states import drop_all_but_newest, not_resumable_message, resumable
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
        keep_optimizer: str = "all",
    ) -> None:
        self.run = run
        self.keep_last = keep_last
        self.keep_optimizer = keep_optimizer
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
        check_room(self.run.checkpoints, step)  # DiskFullError: the run stops, nothing written
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
            rng: dict[str, Any] = {"driver": capture_rng()}  # the workers': one state per rank
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
        if self.keep_optimizer == "last":  # the newest is in place: the others' states go
            freed = drop_all_but_newest(complete_checkpoints(self.run.checkpoints))
            if freed:
                self.run.log_event(
                    f"optimizer states of the older checkpoints dropped ({gb(freed)}; "
                    "run.keep_optimizer: last): they export, they do not resume"
                )
        warning = low_space_warning(self.run.checkpoints, path)
        if warning is not None:
            self.run.log_event(warning)
            self.ui.message(warning)

    def restore(
        self, checkpoint: Path | None, stateful: list[Cluster] | None = None
    ) -> dict[str, Any] | None:
        """Load `checkpoint` into the (fresh) workers (the `stateful` clusters' state, default
        the trained one's) and the driver's RNG, rewind the run folder; returns the driver
        state saved with it (None: from the start)."""
        if checkpoint is None:
            self.run.rewind(0, 0)
            return None
        if not resumable(checkpoint):
            raise ConfigError(not_resumable_message(checkpoint, self.run.root.name))
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

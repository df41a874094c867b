"""What a run records each step: the metrics line (metrics.jsonl, the trackers, the status
file, the display) and the step's samples, with the memory peaks measured so far."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollcli.distributed.cluster import Cluster
from rollcli.distributed.process_control import ProcessControl
from rollcli.runs.peak_memory import PeakMemory
from rollcli.runs.run_dir import RunDir
from rollcli.runtime.display_protocol import Display


class RunLog:
    """`tracker()`: the run's trackers (set by the launcher after the run starts), or None;
    `clusters()`: the running clusters, whose GPU peaks a GPU run records."""

    def __init__(
        self,
        run: RunDir,
        total_steps: int,
        save_samples: bool,
        display: Display,
        memory: PeakMemory,
        clusters: Callable[[], list[Cluster]],
        tracker: Callable[[], Any],
    ) -> None:
        self.run = run
        self.total_steps = total_steps
        self.save_samples = save_samples
        self.ui = display
        self.memory = memory
        self.clusters = clusters
        self.tracker = tracker

    def samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The step's samples: samples/step-N.jsonl and the trackers' sample tables
        (`run.save_samples: false` keeps them out of both)."""
        if not self.save_samples:
            return
        self.run.write_samples(step, rows)
        tracker = self.tracker()
        if tracker is not None:
            tracker.log_samples(step, rows)

    def metrics(self, metrics: dict[str, Any]) -> None:
        self.run.log_metrics(metrics)
        if self.memory.measure == "cuda":
            self.record_gpu_peaks()
        tracker = self.tracker()
        if tracker is not None:
            tracker.log(metrics, metrics["step"])
        self.run.write_status("running", step=metrics["step"], total_steps=self.total_steps)
        self.ui.step_done(metrics["step"], metrics)

    def record_gpu_peaks(self) -> None:
        """Each GPU role's peak so far (torch's peak allocated, the highest of its ranks)."""
        for cluster in self.clusters():
            peaks = [p for p in cluster.poll(ProcessControl.peak_gpu_memory) if p is not None]
            if peaks:
                self.memory.update(cluster.name, max(peaks))
        self.memory.write()

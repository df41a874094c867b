"""The bookkeeping of a run, shared by the driver loop (`driver.drive`) and the pipeline it
runs: logging, the stop and time-limit rules, checkpoints with every process's RNG, restore,
and restarting workers that died. The launcher makes one per run and hands it to both.

The rules: validation at step 0, a checkpoint at the last step (and every `run.save_every`),
the first Ctrl-C finishes the step and checkpoints, a dead worker sends the run back to its
newest checkpoint with fresh workers (at most `run.max_restarts` times).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch

from rollcli.config.recipe import RecipeConfig
from rollcli.distributed.calls import get, submit
from rollcli.distributed.cluster import Cluster
from rollcli.distributed.process_control import ProcessControl
from rollcli.pipelines.display_protocol import Display
from rollcli.planning.role_table import roles_for
from rollcli.runs.checkpoint import (
    latest_checkpoint,
    load_tensors_file,
    read_state,
    write_checkpoint,
)
from rollcli.runs.faults import FaultInjector, fault_roles
from rollcli.runs.peak_memory import PeakMemory
from rollcli.runs.rng import capture_rng, restore_rng
from rollcli.runs.run_dir import RunDir
from rollcli.workers.actor_train import ActorTrainWorker

PHASES = {
    "generate": "generating",
    "reward": "scoring rewards",
    "forward": "scoring with the reference / teacher / critic",
    "train": "training",
    "sync": "syncing weights",
    "validate": "validating",
}
RNG_FILE = "rng.pt"  # the driver's generators and every worker's, per role and rank


class WorkersLostError(RuntimeError):
    pass


class Stateful(Protocol):
    """A trained role's worker (actor_train, critic): what a checkpoint saves and loads of
    it beside the model (optimizer, scheduler, ...)."""

    def save_state(self, folder: str) -> None: ...

    def load_state(self, folder: str) -> None: ...


class RunControl:
    def __init__(
        self,
        cfg: RecipeConfig,
        run: RunDir,
        run_id: str,
        display: Display,
    ) -> None:
        self.cfg = cfg
        self.run_id = run_id
        # `kill-worker@POINT` kills a worker of the role that runs POINT (the role table's)
        self.fault_roles = fault_roles(roles_for(cfg))
        self.run = run
        self.ui = display
        self.tracker: Any = None  # a tracking.fanout.Trackers, set by the launcher
        self.current_step = 0
        self.restarts = 0
        self.stop_requested = False
        self.stopped_early = False
        self.clusters: list[Cluster] = []
        self.worker_pids: dict[str, list[int]] = {}
        self.faults = FaultInjector.from_env(self._kill_worker)
        self.memory = PeakMemory(
            run.root,
            planned_per_rank(cfg),
            measure="cuda" if cfg.resources.gpus > 0 else "pss",
            log_event=run.log_event,
            step=lambda: self.current_step,
        )

    # ---- workers -----------------------------------------------------------------------
    def started(self, clusters: list[Cluster]) -> None:
        """Record the running clusters (the first is the trained one)."""
        self.clusters = clusters
        self.worker_pids = {c.name: c.call(ProcessControl.process_id) for c in clusters}
        if self.memory.measure == "pss":  # the workers' PSS, sampled from this process
            self.memory.watch(self.worker_pids)
        lora = self.cfg.train.lora
        if lora is not None and self.restarts == 0:
            trained, total = clusters[0].call(ActorTrainWorker.trainable_parameters)[0]
            ref = self.cfg.reference_role
            self.run.log_event(
                f"LoRA r={lora.r}, alpha={lora.alpha:g} on {lora.target_modules}: {trained:,} of "
                f"{total:,} parameters train"
                + ("; the reference is actor_train with its adapters off" if ref else "")
            )

    def kill_workers(self) -> None:
        for c in self.clusters:
            c.kill()

    def shutdown(self) -> None:
        """Record the last memory peaks, kill the workers, close the tracker."""
        self.memory.stop()
        self.kill_workers()
        if self.tracker is not None:
            self.tracker.close()

    def _kill_worker(self, point: str) -> None:
        """Fault injection: SIGKILL the first worker of the role that `point` runs on."""
        os.kill(self.worker_pids[self.fault_roles[point]][0], signal.SIGKILL)

    # ---- the loop's rules ----------------------------------------------------------------
    def start_display(self, start_step: int, engine: str) -> float:
        """Show the run; returns the time-limit deadline (`perf_counter` seconds)."""
        self.ui.start(
            run_id=self.run_id,
            run_dir=str(self.run.root),
            total_steps=self.cfg.train.steps,
            start_step=start_step,
            engine=engine,
        )
        limit_s = self.cfg.run.time_limit_min * 60
        return time.perf_counter() + limit_s if limit_s else float("inf")

    def phase(self, point: str) -> None:
        self.ui.phase(PHASES[point])
        self.faults.hit(point, self.current_step)

    def final(self, step: int, deadline: float) -> bool:
        if step == self.cfg.train.steps:
            return True
        if time.perf_counter() >= deadline:
            self.run.log_event(
                f"time limit of {self.cfg.run.time_limit_min:g} min reached after step {step}"
            )
            return True
        return False

    @staticmethod
    def due(step: int, every: int) -> bool:
        return every > 0 and step % every == 0

    def request_stop(self) -> None:
        self.stop_requested = True
        self.run.log_event(
            f"stop requested (step {self.current_step}): stopping at the end of the step"
        )

    def stop_here(self, step: int, saved: bool, checkpoint: Callable[[int], None]) -> bool:
        """After a Ctrl-C: stop at this step boundary with a checkpoint of `step` (not
        validated, so the metrics stay those of the uninterrupted run)."""
        if not self.stop_requested:
            return False
        if not saved:
            checkpoint(step)
        self.stopped_early = True
        self.run.log_event(f"stopped after step {step}, as requested")
        return True

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """The step's samples: samples/step-N.jsonl and the trackers' sample tables
        (`run.save_samples: false` keeps them out of both)."""
        if not self.cfg.run.save_samples:
            return
        self.run.write_samples(step, rows)
        if self.tracker is not None:
            self.tracker.log_samples(step, rows)

    def log(self, metrics: dict[str, Any]) -> None:
        self.run.log_metrics(metrics)
        if self.memory.measure == "cuda":
            self.record_gpu_peaks()
        if self.tracker is not None:
            self.tracker.log(metrics, metrics["step"])
        self.run.write_status("running", step=metrics["step"], total_steps=self.cfg.train.steps)
        self.ui.step_done(metrics["step"], metrics)

    def record_gpu_peaks(self) -> None:
        """Each GPU role's peak so far (torch's peak allocated, the highest of its ranks)."""
        for cluster in self.clusters:
            peaks = [p for p in cluster.poll(ProcessControl.peak_gpu_memory) if p is not None]
            if peaks:
                self.memory.update(cluster.name, max(peaks))
        self.memory.write()

    # ---- checkpoints ---------------------------------------------------------------------
    def checkpoint(
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
        trained = self.clusters[0]
        stateful = stateful or self.clusters[:1]

        def fill(folder: Path) -> None:
            # every rank: rank 0 writes, data-parallel ranks join its collectives (ZeRO-3)
            refs = trained.call_async(ActorTrainWorker.save_pretrained, str(folder))
            for c in stateful:
                refs += c.call_async(Stateful.save_state, str(folder))
            get(refs)
            rng = {"driver": capture_rng()}
            rng.update({c.name: c.call(ProcessControl.rng_state) for c in self.clusters})
            torch.save(rng, folder / RNG_FILE)
            for name, obj in (driver_files or {}).items():
                torch.save(obj, folder / name)

        state = {"step": step, **driver_state, "metrics_lines": len(self.run.read_metrics())}
        path = write_checkpoint(
            self.run.checkpoints,
            step,
            fill,
            state,
            self.cfg.run.keep_last,
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
        state = read_state(checkpoint)
        refs = []
        for c in stateful or self.clusters[:1]:
            refs += c.call_async(Stateful.load_state, str(checkpoint))
        get(refs)
        rng = load_tensors_file(checkpoint / RNG_FILE)
        restore_rng(rng["driver"])
        refs = []
        for cluster in self.clusters:
            for worker, worker_rng in zip(cluster.workers, rng[cluster.name], strict=True):
                refs.append(submit(worker, ProcessControl.load_rng_state, worker_rng))
        get(refs)
        self.run.rewind(state["step"], state["metrics_lines"])
        if self.tracker is not None:
            self.tracker.rewind(state["step"])
        return state

    def recover(
        self,
        exc: BaseException,
        start_workers: Callable[[], None],
        restore: Callable[[Path | None], int],
    ) -> int:
        """A worker died: restart every worker from the newest checkpoint; returns its step."""
        step = self.current_step
        self.restarts += 1
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        if self.restarts > self.cfg.run.max_restarts:
            raise WorkersLostError(
                f"a worker died during step {step} and run.max_restarts="
                f"{self.cfg.run.max_restarts} restarts are used up ({reason})"
            ) from exc
        self.run.log_event(
            f"a worker died during step {step} ({type(exc).__name__}: {reason}); restarting "
            f"the workers (restart {self.restarts} of {self.cfg.run.max_restarts})"
        )
        self.kill_workers()
        start_workers()
        checkpoint = latest_checkpoint(self.run.checkpoints)
        start = restore(checkpoint)
        where = f"checkpoint {checkpoint.name}" if checkpoint else "the start"
        self.run.log_event(f"workers restarted; retrying from step {start + 1} ({where})")
        return start


def planned_per_rank(cfg: RecipeConfig) -> dict[str, int]:
    """The plan's bytes for one rank of each role while it computes (what `memory.json`
    compares a measured peak with)."""
    from rollcli.planning.from_recipe import plan_recipe

    plan = plan_recipe(cfg)
    return {role: memory.active.total for role, memory in plan.role_memory.items()}

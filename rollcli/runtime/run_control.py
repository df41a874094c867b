"""The bookkeeping of a run, shared by the driver loop (`launch/driver.py`) and the pipeline
it runs: its workers, the stop and time-limit rules, fault injection and restarting workers
that died, with the run's log (`run_log.py`: `ctl.log`) and checkpoints
(`checkpointer.py`: `ctl.checkpoints`). The launcher makes one per run and hands it to both.

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
from typing import TYPE_CHECKING, Any

from rollcli.config.recipe import RecipeConfig
from rollcli.distributed.cluster import Cluster
from rollcli.distributed.process_control import ProcessControl
from rollcli.models.registry import TINY_RANDOM, TINY_RANDOM_MOE
from rollcli.planning.role_table import roles_for
from rollcli.runs.checkpoint import (
    latest_checkpoint,
)
from rollcli.runs.faults import FaultInjector, fault_roles
from rollcli.runs.peak_memory import PeakMemory
from rollcli.runs.run_dir import RunDir
from rollcli.runtime.checkpointer import Checkpointer
from rollcli.runtime.display_protocol import Display
from rollcli.runtime.run_log import RunLog
from rollcli.workers.trained_model import TrainedModelWorker

if TYPE_CHECKING:
    from rollcli.planning.run_plan import RunPlan

PHASES = {
    "generate": "generating",
    "reward": "scoring rewards",
    "forward": "scoring with the reference / teacher / critic",
    "train": "training",
    "sync": "syncing weights",
    "validate": "validating",
}


class WorkersLostError(RuntimeError):
    pass


class RunControl:
    def __init__(
        self,
        cfg: RecipeConfig,
        plan: RunPlan,
        run: RunDir,
        run_id: str,
        display: Display,
    ) -> None:
        """`plan`: the run's plan, made once before it started (planning/run_plan.py); the
        pipeline's workers are built from it (`ctl.plan`), restarted ones too."""
        self.cfg = cfg
        self.plan = plan
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
        self.stop_reason: str | None = None
        self.last_save = time.monotonic()  # of the last checkpoint (`run.save_every_min`)
        self.clusters: list[Cluster] = []
        self.worker_pids: dict[str, list[int]] = {}
        self.faults = FaultInjector.from_env(self._kill_worker)
        self.memory = PeakMemory(
            run.root,
            plan.planned_per_rank(),
            measure="cuda" if cfg.resources.gpus > 0 else "pss",
            log_event=run.log_event,
            step=lambda: self.current_step,
            # a test model's plan is the process around it
            warn=cfg.model not in (TINY_RANDOM.name, TINY_RANDOM_MOE.name),
        )
        self.checkpoints = Checkpointer(
            run,
            cfg.run.keep_last,
            display,
            self.faults,
            lambda: self.clusters,
            lambda: self.tracker,
            keep_optimizer=cfg.run.keep_optimizer,
        )
        self.log = RunLog(
            run,
            cfg.train.steps,
            cfg.run.save_samples,
            display,
            self.memory,
            lambda: self.clusters,
            lambda: self.tracker,
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
            trained, total = clusters[0].call(TrainedModelWorker.trainable_parameters)[0]
            ref = self.cfg.reference_role
            self.run.log_event(
                f"LoRA r={lora.r}, alpha={lora.alpha:g} on {lora.target_modules}: {trained:,} of "
                f"{total:,} parameters train"
                + ("; the reference is actor_train with its adapters off" if ref else "")
            )
            note = clusters[0].call(TrainedModelWorker.lora_coverage)[0]
            if note is not None:  # an MoE model: what peft reaches there, and what not
                self.run.log_event(note)
                self.ui.message(note)

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
            eval_every=self.cfg.run.eval_every,
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

    def save_due_by_time(self) -> bool:
        """`run.save_every_min` minutes since the last checkpoint (or the start) passed."""
        every = self.cfg.run.save_every_min * 60
        return every > 0 and time.monotonic() - self.last_save >= every

    def request_stop(self, reason: str = "SIGINT") -> None:
        """Stop at the end of the step in flight (which finishes), with a checkpoint;
        `reason`: the signal (SIGINT, SIGTERM) or `collapse`."""
        self.stop_requested = True
        self.stop_reason = reason
        self.run.log_event(
            f"stop requested ({reason}) during step {self.current_step}: the step finishes, "
            "then a checkpoint"
        )

    def stop_here(self, step: int, saved: bool, checkpoint: Callable[[int], None]) -> bool:
        """After a stop request: stop at this step boundary with a checkpoint of `step` (not
        validated, so the metrics stay those of the uninterrupted run)."""
        if not self.stop_requested:
            return False
        if not saved:
            checkpoint(step)
        self.stopped_early = True
        return True

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


def report_data_notes(ctl: RunControl, notes: tuple[str, ...]) -> None:
    """What reading the data left out or sampled: in events.log and on the screen, once."""
    for note in notes:
        ctl.run.log_event(f"data: {note}")
        ctl.ui.message(f"data: {note}")

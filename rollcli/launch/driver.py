"""The one loop that runs every pipeline (rlvr, agentic, sft, dpo, distill).

    baseline validation (step 0)
    for each step: step(n) → validate (every `run.eval_every` steps and at the last one)
                   → log the samples and the metrics line → checkpoint (every
                   `run.save_every` steps or `run.save_every_min` minutes, at the last one,
                   and at a validation that is the best so far: runs/best.py) → warn of collapse signals (runs/collapse.py)
                   → stop if asked (Ctrl-C, or `run.stop_on_collapse`)

The last step is `train.steps`, or the first one to end past `run.time_limit_min`. The first
Ctrl-C (`RunControl.request_stop`) finishes the step and checkpoints it, unvalidated, so the
metrics stay those of the uninterrupted run. A worker that dies sends the run back to its
newest checkpoint with fresh workers (at most `run.max_restarts` times); a worker that runs
out of memory ends the run with what to lower.

`time/step_s` is the whole step's wall time, its validation included (`time/validate_s`).
"""

from __future__ import annotations

import time
from typing import Any

from rollcli.distributed.cluster import (
    out_of_memory_error,
    out_of_memory_message,
    worker_lost_errors,
)
from rollcli.pipelines.protocol import Pipeline
from rollcli.runs.best import improves, mark_best, read_best
from rollcli.runs.collapse import CollapseWatch, validation_score
from rollcli.runtime.run_control import RunControl


class WorkerOutOfMemoryError(RuntimeError):
    """Ray killed a worker because the machine ran low on memory."""


def drive(pipeline: Pipeline, ctl: RunControl, start_step: int = 0) -> dict[str, Any]:
    """Run steps `start_step + 1 ..`; return the last metrics line written."""
    deadline = ctl.start_display(start_step, engine=pipeline.engine)
    step = start_step
    while True:
        try:
            return _steps(pipeline, ctl, step, deadline)
        except out_of_memory_error() as exc:  # the same step would run out again
            raise WorkerOutOfMemoryError(out_of_memory_message(exc, ctl.current_step)) from None
        except worker_lost_errors() as exc:
            step = ctl.recover(exc, pipeline.start_workers, pipeline.restore)


def _steps(pipeline: Pipeline, ctl: RunControl, step: int, deadline: float) -> dict[str, Any]:
    cfg = ctl.cfg
    last: dict[str, Any] = {}
    watch = CollapseWatch()
    if step == 0:  # the baseline every later validation is compared with
        ctl.current_step = 0
        last = {"step": 0, **pipeline.baseline()}
        ctl.log.metrics(last)
    if ctl.stop_here(step, saved=True, checkpoint=pipeline.checkpoint):
        return last  # Ctrl-C before this step: nothing new to save
    while step < cfg.train.steps:
        step += 1
        ctl.current_step = step
        t_step = time.perf_counter()
        result = pipeline.step(step)
        metrics = result.metrics

        final = ctl.final(step, deadline)  # the last step, or the last the time limit allows
        if final or ctl.due(step, cfg.run.eval_every):
            metrics.update(pipeline.validate())
        metrics["time/step_s"] = time.perf_counter() - t_step
        if result.samples is not None:
            ctl.log.samples(step, result.samples)
        ctl.log.metrics(metrics)
        if result.summary is not None:
            ctl.ui.message(f"  step {step}: {result.summary}")

        rows = ctl.run.read_metrics()  # every line so far, this step's included
        best = _best_so_far(ctl, metrics, rows)
        saved = final or ctl.due(step, cfg.run.save_every) or best is not None
        saved = saved or ctl.save_due_by_time()
        if saved:
            pipeline.checkpoint(step)
            ctl.last_save = time.monotonic()
        if best is not None:
            mark_best(ctl.run.checkpoints, step, *best)
            ctl.run.log_event(f"best validation so far: {best[0]} {best[1]:.4g} at step {step}")
        collapsed = _collapse_warnings(ctl, watch, rows)
        if collapsed and cfg.run.stop_on_collapse and not final:
            ctl.request_stop("collapse")
        last = metrics
        if final or ctl.stop_here(step, saved, pipeline.checkpoint):
            break
    return last


def _best_so_far(
    ctl: RunControl, metrics: dict[str, Any], rows: list[dict[str, Any]]
) -> tuple[str, float, float] | None:
    """(metric, value, score) when this step's validation beats step 0's and every earlier
    one (`runs/best.py`), else None."""
    scored = validation_score(metrics)
    if scored is None:
        return None
    baseline = next((validation_score(r) for r in rows if r.get("step") == 0), None)
    bar = baseline[1] if baseline else None
    if not improves(scored[1], bar, read_best(ctl.run.checkpoints)):
        return None
    return scored[0], float(metrics[scored[0]]), scored[1]


def _collapse_warnings(ctl: RunControl, watch: CollapseWatch, rows: list[dict[str, Any]]) -> bool:
    """Write each collapse signal that is new at this step to events.log; any new?"""
    new = watch.update(rows)
    for name, text in new.items():
        ctl.run.log_event(f"warning: collapse signal '{name}' at step {ctl.current_step}: {text}")
    return bool(new)

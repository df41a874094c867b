"""Launch a training run: run folder, Ray, the pipeline, the run's status — no CLI code."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rollcli.config.loader import dump_recipe
from rollcli.config.recipe import RecipeConfig
from rollcli.pipelines.display_protocol import Display
from rollcli.runs.run_dir import RunDir, new_run_id


class PipelineNotBuiltError(ValueError):
    pass


BUILT_PIPELINES = ("rlvr",)


def _check_supported(cfg: RecipeConfig) -> None:
    from rollcli.config.errors import ConfigError

    if cfg.rollout.engine == "vllm":
        raise ConfigError(
            "rollout.engine = 'vllm': the vLLM engine is not built into this release yet; "
            "use rollout.engine=hf (or auto)"
        )
    if cfg.algorithm.tis_cap is not None:
        raise ConfigError(
            "algorithm.tis_cap needs the inference engine's own log-probs of the sampled tokens, "
            "which the hf engine does not report; remove algorithm.tis_cap (the vllm engine and "
            "async rollout will use it)"
        )
    if cfg.train.num_workers != 1:
        raise ConfigError(
            f"train.num_workers = {cfg.train.num_workers}: the hf training strategy runs on one "
            "worker; set train.num_workers=1"
        )


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    final: dict[str, Any]
    first_val: float | None
    wall_s: float
    mean_step_s: float | None = None


def launch_training(cfg: RecipeConfig, display: Display, run_id: str | None = None) -> RunResult:
    if cfg.pipeline not in BUILT_PIPELINES:
        raise PipelineNotBuiltError(
            f"the {cfg.pipeline!r} pipeline is not built yet (recipe {cfg.name!r}); "
            f"pipelines that train today: {', '.join(BUILT_PIPELINES)}"
        )
    _check_supported(cfg)
    from rollcli.distributed.ray_session import start_ray
    from rollcli.models.loading import resolve_model
    from rollcli.pipelines.rlvr import RLVRPipeline
    from rollcli.tracking.tensorboard import TensorBoardTracker

    run_id = run_id or cfg.run.run_id or new_run_id(cfg.name)
    start = time.perf_counter()
    try:
        display.phase(f"preparing model {cfg.model}")
        model_path = str(resolve_model(cfg.model))
        run = RunDir.create(cfg.run.runs_dir, run_id, dump_recipe(cfg))
    except BaseException:
        display.close()
        raise
    run.write_status("starting", recipe=cfg.name, model=cfg.model, total_steps=cfg.train.steps, started=time.time())
    run.log_event(f"run {run_id} started: recipe {cfg.name}, model {cfg.model} ({model_path})")
    pipeline = None
    try:
        display.phase("starting Ray")
        start_ray(cfg.resources.ray_address, cfg.resources.num_cpus)
        pipeline = RLVRPipeline(cfg, run, run_id, model_path, display)
        if cfg.run.tensorboard:
            pipeline.tracker = TensorBoardTracker(run.root / "tensorboard")
        pipeline.setup()
        final = pipeline.train()
    except KeyboardInterrupt:
        run.write_status("interrupted")
        run.log_event("interrupted by the user")
        raise
    except BaseException as exc:
        run.write_status("failed", error=f"{type(exc).__name__}: {exc}")
        run.log_event(f"failed: {type(exc).__name__}: {exc}")
        raise
    finally:
        if pipeline is not None:
            pipeline.shutdown()
        display.close()
    run.write_status("finished", finished=time.time())
    run.log_event("finished")
    metrics = run.read_metrics()
    first_val = next((m["val/accuracy"] for m in metrics if "val/accuracy" in m), None)
    step_times = [m["time/step_s"] for m in metrics if "time/step_s" in m]
    mean_step = sum(step_times) / len(step_times) if step_times else None
    return RunResult(run_id, run.root, final, first_val, time.perf_counter() - start, mean_step)

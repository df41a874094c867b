"""Start or resume a training run: run folder, Ray, the pipeline, the run's status — no CLI.

The status in `status.json` is always true: `running` with a heartbeat while the process
lives, then `finished`, `failed`, `stopped` (the first Ctrl-C or SIGTERM finished the step
and wrote a checkpoint: `stop_reason` names the signal, or `collapse`) or `interrupted` (a
second signal stopped it at once; launch/stop_signals.py). A run killed outright is reported
as `killed` from its dead pid or stale heartbeat (`RunDir.effective_status`).
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rollcli.config.errors import ConfigError
from rollcli.config.loader import dump_recipe, load_recipe
from rollcli.config.recipe import AgenticRecipe, RecipeConfig
from rollcli.distributed.deepspeed_env import name_cpu_accelerator
from rollcli.launch.prelaunch import check_machine, check_recipe, with_run_model
from rollcli.launch.registry import pipeline_class, pipeline_module
from rollcli.launch.resume_rules import check_resumable, config_changes
from rollcli.launch.stop_signals import StopNow, StopSignals
from rollcli.launch.warmup import WARMUP_RUN, warmup_checkpoint, warmup_episodes, warmup_recipe
from rollcli.runs.checkpoint import latest_checkpoint, read_state
from rollcli.runs.optimizer_states import not_resumable_message, resumable
from rollcli.runs.run_dir import RunDir, new_run_id
from rollcli.runs.step_time import StepTimes
from rollcli.runtime.display_protocol import Display

if TYPE_CHECKING:  # run_control imports torch
    from rollcli.planning.auto_strategy import AutoChoice
    from rollcli.planning.run_plan import RunPlan


class RunNotFoundError(ValueError):
    pass


def _check_supported(
    cfg: RecipeConfig, display: Display | None = None
) -> tuple[AutoChoice, RunPlan]:
    """The pre-launch checks (`rollcli.launch.prelaunch`): the recipe's own (those of `roll
    plan` and `--dry-run`), that its plan fits, then this machine's. Returns the recipe with
    `train.strategy: auto` resolved (planning/auto_strategy.py), the one that runs, and its
    plan: the run's one plan, handed down to its control and its workers."""
    from rollcli.planning.auto_strategy import resolve_auto
    from rollcli.planning.run_plan import plan_run

    check_recipe(cfg, None if display is None else display.message)
    choice = resolve_auto(cfg)
    plan = plan_run(choice.cfg)  # refuses a run that cannot fit, with the advice
    check_machine(choice.cfg)
    return choice, plan


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    final: dict[str, Any]
    first_val: dict[str, Any] | None  # the first metrics row with val/accuracy
    wall_s: float
    steps: StepTimes | None = None  # the mean training step, validation apart
    status: str = "finished"
    resumed_from: int | None = None
    stop_reason: str | None = None  # a stopped run's signal (SIGINT, SIGTERM) or `collapse`
    total_steps: int = 0


def launch_training(cfg: RecipeConfig, display: Display, run_id: str | None = None) -> RunResult:
    """A new run of `cfg` in a new run folder. A run id (or run folder) as the model is that
    run's newest checkpoint, recorded in the new run's recipe by its path."""
    cfg = with_run_model(cfg)
    fetch_hub_config(cfg.model)  # a hub model's shapes, for the plan (not its weights yet)
    choice, plan = _check_supported(cfg, display)
    cfg = choice.cfg
    run_id = run_id or cfg.run.run_id or new_run_id(cfg.name)
    start = time.perf_counter()
    name_cpu_accelerator(on_gpu=cfg.resources.gpus > 0)  # before transformers imports deepspeed
    model_path = _prepare_model(cfg, display)
    _prepare_data(cfg, model_path, display)
    try:
        run = RunDir.create(cfg.run.runs_dir, run_id, dump_recipe(cfg))
    except BaseException:
        display.close()
        raise
    run.write_status(
        "starting",
        recipe=cfg.name,
        model=cfg.model,
        total_steps=cfg.train.steps,
        started=time.time(),
    )
    run.log_event(f"run {run_id} started: recipe {cfg.name}, model {cfg.model} ({model_path})")
    for line in choice.lines:  # what auto chose, one event each
        run.log_event(line.strip())
    model_path = warm_up(cfg, run, display) or model_path
    return _drive(cfg, plan, run, run_id, model_path, display, None, start)


def run_exists(runs_dir: str | Path, run_id: str) -> bool:
    return (Path(runs_dir) / run_id / "recipe.yaml").exists()


def resume_training(
    runs_dir: str | Path, run_id: str, overrides: list[str], display: Display
) -> RunResult:
    """Continue run `run_id` from its newest complete checkpoint (`key=value` overrides are
    applied to its recipe and recorded)."""
    root = Path(runs_dir) / run_id
    if not run_exists(runs_dir, run_id):
        raise RunNotFoundError(f"no run {run_id!r} in {runs_dir} (`roll runs ls` lists the runs)")
    run = RunDir(root)
    recorded, _ = load_recipe(str(root / "recipe.yaml"), [], saved_run=True)
    cfg, _ = load_recipe(str(root / "recipe.yaml"), overrides, saved_run=True)
    check_resumable(recorded, cfg)
    # a saved recipe names its strategy: nothing to resolve; planned as resumed (overrides)
    choice, plan = _check_supported(cfg, display)
    cfg = choice.cfg
    if run.effective_status() in ("running", "starting"):
        raise ConfigError(
            f"run {run_id!r} is still running (pid {run.read_status().get('pid')}); stop it "
            "first (Ctrl-C in its terminal) or wait for it"
        )
    checkpoint = latest_checkpoint(run.checkpoints)
    done = read_state(checkpoint)["step"] if checkpoint else 0
    if done >= cfg.train.steps:
        raise ConfigError(
            f"run {run_id!r} already reached step {done} of train.steps={cfg.train.steps}; "
            f"to train further resume with train.steps=N (N > {done})"
        )
    if checkpoint is not None and not resumable(checkpoint):
        raise ConfigError(not_resumable_message(checkpoint, run_id))
    where = f"checkpoint {checkpoint.name}" if checkpoint else "the start (no checkpoint yet)"
    # on screen, first: which step the run goes on from (events.log records it too)
    display.message(
        f"resuming run {run_id} from {where}: step {done + 1} of {cfg.train.steps} next"
    )
    start = time.perf_counter()
    name_cpu_accelerator(on_gpu=cfg.resources.gpus > 0)  # before transformers imports deepspeed
    model_path = _prepare_model(cfg, display)
    _prepare_data(cfg, model_path, display)
    changes = config_changes(recorded, cfg)
    if changes:
        (root / "recipe.yaml").write_text(dump_recipe(cfg), encoding="utf-8")
        display.message(f"resuming {run_id} with recipe changes: {'; '.join(changes)}")
    previous = run.effective_status()
    resumes = run.read_status().get("resumes", [])
    resumes.append({"from_step": done, "changes": changes, "time": time.time()})
    run.write_status("starting", total_steps=cfg.train.steps, step=done, resumes=resumes)
    run.log_event(
        f"resuming from {where} (the last process ended {previous})"
        + (f"; recipe changes: {', '.join(changes)}" if changes else "")
    )
    model_path = warm_up(cfg, run, display) or model_path
    return _drive(cfg, plan, run, run_id, model_path, display, checkpoint or "start", start)


def _prepare_model(cfg: RecipeConfig, display: Display) -> str:
    from rollcli.models.loading import resolve_model

    try:
        display.phase(f"preparing model {cfg.model}")
        return str(resolve_model(cfg.model))
    except BaseException:
        display.close()
        raise


def _prepare_data(cfg: RecipeConfig, model_path: str, display: Display) -> None:
    """A dataset read and tokenized whole before Ray starts (`launch/data_check.py`)."""
    from rollcli.launch.data_check import prepare_data

    try:
        display.phase("reading the data")
        prepare_data(cfg, model_path)
    except BaseException:
        display.close()
        raise


def fetch_hub_config(model: str) -> None:
    """A hub model that the registry does not know is planned from its config.json: fetched
    alone first (a small file), so a run that cannot fit stops before the weights come."""
    from rollcli.models.hub import fetch_file, is_repo_id, split_revision
    from rollcli.models.loading import hub_model
    from rollcli.models.registry import spec_for_hub_id

    if not is_repo_id(model) or hub_model(model) is None:
        return
    repo, revision = split_revision(model)
    if spec_for_hub_id(repo) is None:
        from rollcli.models.hub import HubError
        from rollcli.models.loading import ModelNotFoundError

        try:
            fetch_file(repo, "config.json", revision)
        except HubError as exc:
            raise ModelNotFoundError(str(exc)) from None


def warm_up(cfg: RecipeConfig, run: RunDir, display: Display) -> str | None:
    """The recipe's warm-up (`rollcli.launch.warmup`), if it has one: the model RL starts
    from. A warm-up stopped or failed marks the RL run interrupted or failed."""
    if not isinstance(cfg, AgenticRecipe) or cfg.warmup is None:
        return None
    folder = run.root / WARMUP_RUN
    with recorded(run, "the warm-up", "`roll resume` finishes it"):
        if RunDir(folder).read_status().get("status") != "finished":
            episodes = warmup_episodes(cfg, folder, run, display)
            run.log_event(f"warm-up: sft for {cfg.warmup.steps} steps in {folder}")
            if run_exists(run.root, WARMUP_RUN):
                resume_training(run.root, WARMUP_RUN, [], display)
            else:
                launch_training(warmup_recipe(cfg, episodes, run.root), display, WARMUP_RUN)
            if RunDir(folder).read_status().get("status") != "finished":
                raise KeyboardInterrupt  # stopped during the warm-up: `roll resume` finishes it
        return warmup_checkpoint(folder, run)


def _drive(
    cfg: RecipeConfig,
    plan: RunPlan,
    run: RunDir,
    run_id: str,
    model_path: str,
    display: Display,
    resume_from: Path | str | None,
    start: float,
) -> RunResult:
    """Ray, the pipeline, the driver loop and the status around them; `plan`: the run's
    plan (`_check_supported`'s), which its control and its workers read; `resume_from` a
    checkpoint, "start" (resume a run that has none) or None (a new run)."""
    from rollcli.distributed.ray_session import running_ray, start_ray, stop_ray_at_exit

    # the driver's torch, transformers and data generators load while Ray's daemons start
    imports = _import_in_background(*_driver_modules(cfg))
    ctl = None
    start_step = 0
    try:
        with recorded(run), StopSignals(lambda: ctl, display) as signals:
            display.phase("starting Ray")
            if running_ray() is None:  # a session of this process's own: it ends at exit
                start_ray(cfg.resources.ray_address, cfg.resources.num_cpus, cfg.resources.gpus)
                stop_ray_at_exit()
            signals.install()  # ray.init put its own SIGTERM handler in their place
            imports.join()
            from rollcli.launch.driver import drive
            from rollcli.runtime.run_control import RunControl
            from rollcli.tracking.fanout import make_trackers

            ctl = RunControl(cfg, plan, run, run_id, display)
            ctl.tracker = make_trackers(
                list(cfg.run.trackers),
                run.root,
                cfg.model_dump(mode="json"),
                run_id,
                mode=cfg.run.tracker_mode,
                project=cfg.run.tracker_project,
            )
            pipeline = pipeline_class(cfg.pipeline)(cfg, ctl, model_path)
            pipeline.setup()
            if resume_from is not None:
                start_step = pipeline.restore(None if resume_from == "start" else Path(resume_from))
            run.write_status("running", step=start_step)
            final = drive(pipeline, ctl, start_step)
    finally:
        if ctl is not None:
            ctl.shutdown()
        display.close()
    status = "stopped" if ctl.stopped_early else "finished"
    reason = ctl.stop_reason if ctl.stopped_early else None
    run.write_status(status, finished=time.time(), stop_reason=reason)
    run.log_event(
        f"stopped ({reason}) at step {ctl.current_step} of {cfg.train.steps}, after a "
        f"checkpoint; `roll resume {run_id}` continues it"
        if status == "stopped"
        else "finished"
    )
    metrics = run.read_metrics()
    first_val = next((m for m in metrics if "val/accuracy" in m), None)
    return RunResult(
        run_id,
        run.root,
        final,
        first_val,
        time.perf_counter() - start,
        StepTimes.of(metrics),
        status,
        start_step if resume_from is not None else None,
        reason,
        cfg.train.steps,
    )


def _driver_modules(cfg: RecipeConfig) -> list[str]:
    """What the driver imports after Ray starts (seconds of it: torch, transformers' auto
    tokenizer, reasoning-gym's generators)."""
    modules = [
        pipeline_module(cfg.pipeline),
        "rollcli.launch.driver",
        "transformers.models.auto.tokenization_auto",
    ]
    data = getattr(cfg, "data", None)  # agentic recipes have none
    if data is not None and data.source == "reasoning_gym":
        modules.append("reasoning_gym")
    return modules


def _import_in_background(*modules: str) -> threading.Thread:
    """A thread importing `modules`; a failure is left to the import that needs the module,
    where it is raised as usual."""

    def load() -> None:
        for name in modules:
            with suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=load, name="roll-imports", daemon=True)
    thread.start()
    return thread


@contextmanager
def recorded(run: RunDir, stage: str = "", resume_hint: str = "") -> Iterator[None]:
    """The run's heartbeat while the block runs, and its status and an event when the block
    is interrupted (Ctrl-C) or fails; `stage` names the part of the run (e.g. "the
    warm-up") in those lines."""
    where = f" during {stage}" if stage else " by the user"
    heartbeat = run.start_heartbeat()
    try:
        yield
    except KeyboardInterrupt as exc:
        how = f" ({exc.signal})" if isinstance(exc, StopNow) else ""
        run.write_status("interrupted", stop_reason=getattr(exc, "signal", "SIGINT"))
        run.log_event(f"interrupted{how}{where}" + (f"; {resume_hint}" if resume_hint else ""))
        raise
    except BaseException as exc:
        prefix = f"{stage.removeprefix('the ')}: " if stage else ""
        run.write_status("failed", error=f"{prefix}{type(exc).__name__}: {exc}")
        run.log_event(f"failed{' in ' + stage if stage else ''}: {type(exc).__name__}: {exc}")
        raise
    finally:
        heartbeat.set()

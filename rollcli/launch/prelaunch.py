"""The checks a run passes before anything starts, in two kinds.

`check_recipe`: what does not depend on the machine (the rewards and environments the
recipe names resolve and take its options (`rollcli.launch.plugin_check`), the model is
one roll can plan, the datasets' first rows read as training reads them
(`rollcli.launch.data_check`), the user's reward scores their reference answers
(`rollcli.launch.reward_check`)).
`roll plan`, `roll train --dry-run` and `roll train` all call it, so each refuses with the
same line, before Ray starts and before the run folder exists. `roll train` and
`--dry-run` then check that the plan fits (`planning.run_plan.plan_run`).

`MACHINE_CHECKS`: what depends on the machine that trains (GPUs visible here, a model's
weights on disk, installed engines, backends and trackers). `roll train` runs them at
launch and stops at the first that fails; `--dry-run` reports them as notes
(`machine_notes`), so a plan for a cluster can be checked on a laptop.

Imports neither torch nor Ray (`roll plan` calls it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rollcli.config.errors import ConfigError
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import rollout_of
from rollcli.launch.data_check import check_data
from rollcli.launch.plugin_check import check_plugins
from rollcli.launch.reward_check import check_reward_calls

if TYPE_CHECKING:
    from rollcli.config.recipe import RecipeConfig
    from rollcli.planning.auto_strategy import AutoChoice


def check_recipe(cfg: RecipeConfig, warn: Callable[[str], None] | None = None) -> list[str]:
    """Raise the error `roll train` would, for anything wrong whatever the machine; return
    what it would download first (a hub dataset not in the cache), one note each. `warn`
    hears what starts but looks wrong (a user reward that raises on a wrong reply)."""
    from rollcli.config.recipe import AgenticRecipe
    from rollcli.planning.model_spec import model_spec

    check_plugins(cfg)  # first: config checked the recipe's shape, these its plugins' names
    model_spec(cfg.model)  # an unknown name: "cannot plan model ...", with a did-you-mean
    notes = check_data(cfg)  # the datasets' first rows, through the recipe's column keys
    if not notes:  # the data is here: the user's reward is called on its first prompts
        for warning in check_reward_calls(cfg):
            if warn is not None:
                warn(warning)
    if isinstance(cfg, AgenticRecipe):
        if cfg.rollout.engine != "auto":  # auto is decided by what is installed: at launch
            from rollcli.rollout.agentic_setup import turn_cache_mib

            turn_cache_mib(cfg.agentic, cfg.rollout.engine)  # only hf takes turn_cache_mib
        from rollcli.launch.warmup import check_warmup

        check_warmup(cfg)  # an expert that cannot solve the user's tasks: refused here
    return notes


def with_run_model(cfg: RecipeConfig) -> RecipeConfig:
    """`cfg` whose model, if it names a run (its id or folder), is that run's newest
    checkpoint, as `roll train` records it."""
    from rollcli.runs.checkpoint import run_checkpoint

    checkpoint = run_checkpoint(cfg.model, cfg.run.runs_dir)
    return cfg if checkpoint is None else cfg.model_copy(update={"model": str(checkpoint)})


def dry_run(
    cfg: RecipeConfig, warn: Callable[[str], None] | None = None
) -> tuple[AutoChoice, list[str], list[str]]:
    """`roll train --dry-run`: raise what `roll train` would refuse before it starts, except
    for this machine's checks, which come back as notes; with the recipe as it would run
    (`train.strategy: auto` resolved, planning/auto_strategy.py). Returns the choice, the
    machine's refusals and what `roll train` would download first. Where the model and data
    are on this machine, the data is read and tokenized whole, as `roll train` does before
    Ray starts (the overlong rule)."""
    from rollcli.models.loading import download_note
    from rollcli.planning.auto_strategy import resolve_auto
    from rollcli.planning.run_plan import plan_run

    cfg = with_run_model(cfg)
    data_notes = check_recipe(cfg, warn)
    choice = resolve_auto(cfg)
    plan_run(choice.cfg)
    refusals = machine_notes(choice.cfg)
    downloads = [n for n in (download_note(cfg.model), *data_notes, *judge_notes(cfg)) if n]
    if not refusals:
        downloads += check_prompt_lengths(choice.cfg, bool(downloads))
    return choice, refusals, downloads


def judge_notes(cfg: RecipeConfig) -> list[str]:
    """Which scores each `general` reward route: the LLM judge where its options name an
    endpoint (`base_url` and `model`), else the rule (rollcli.rewards.general)."""
    from rollcli.rewards.general import judge_configured

    reward = getattr(cfg, "reward", None)
    if reward is None:
        return []
    routes = reward.routes if reward.fn == "mix" else {"": reward.fn}
    notes = []
    for tag, ref in routes.items():
        if ref != "general":
            continue
        options = {**reward.options, **reward.route_options.get(tag, {})}
        where = f"reward.route_options.{tag}" if tag else "reward.options"
        name = f"domain {tag}" if tag else "the general reward"
        if judge_configured(options):
            notes.append(
                f"{name}: scored by the LLM judge {options['model']} at {options['base_url']}"
            )
        else:
            notes.append(
                f"{name}: scored by rule (final-answer match); no judge endpoint is configured "
                f"(set {where}.base_url and .model for the LLM judge)"
            )
    return notes


def check_prompt_lengths(cfg: RecipeConfig, downloading: bool) -> list[str]:
    """Read and tokenize the whole data as `roll train` does before Ray starts (raising
    what it would: the overlong rule), when the model and data are on this machine;
    else return the note that `roll train` does it (nothing is downloaded here)."""
    if getattr(cfg, "data", None) is None:
        return []
    if downloading:
        from rollcli.launch.data_check import check_generated_data

        check_generated_data(cfg)  # needs no model
        return [
            "prompt lengths (data.max_prompt_tokens) are checked once `roll train` has the "
            "model and data"
        ]
    from rollcli.launch.data_check import prepare_data
    from rollcli.models.loading import resolve_model

    prepare_data(cfg, str(resolve_model(cfg.model)))
    return []


def machine_notes(cfg: RecipeConfig) -> list[str]:
    """What `roll train` on this machine would refuse at launch, one line each."""
    from rollcli.models.loading import ModelNotFoundError

    notes = []
    for check in MACHINE_CHECKS:
        try:
            check(cfg)
        except (ConfigError, ModelNotFoundError) as err:
            notes.append(str(err.args[0]) if err.args else str(err))
    return notes


def check_machine(cfg: RecipeConfig) -> None:
    """Raise the first machine check that fails (the launch's last step before the run)."""
    for check in MACHINE_CHECKS:
        check(cfg)


def _check_engine_installed(cfg: RecipeConfig) -> None:
    from rollcli.config.engines import engine_installed, vllm_available
    from rollcli.config.strategy_spec import ENGINES, FALLBACK_ENGINE

    engine = rollout_of(cfg).engine if spec_of(cfg).engine else FALLBACK_ENGINE  # sft, distill
    missing = ENGINES[engine].missing_at_launch if engine in ENGINES else None
    if missing and not engine_installed(engine):
        raise ConfigError(missing)
    if engine == "auto" and cfg.resources.gpus > 0 and not vllm_available():
        raise ConfigError(
            "rollout.engine = 'auto' runs vLLM on GPUs (the engine the plan judged), and vLLM "
            "is not installed here; `pip install vllm`, or plan and run another engine with "
            "rollout.engine=hf"
        )


def _check_backends(cfg: RecipeConfig) -> None:
    from rollcli.planning.backends import missing_backends

    missing = missing_backends(cfg)
    if missing:
        raise ConfigError("; ".join(missing))


def _check_trackers(cfg: RecipeConfig) -> None:
    """Every tracker in run.trackers is installed, and has its API key where it logs online."""
    from rollcli.config.trackers import tracker_problems

    problems = tracker_problems(cfg.run.trackers, cfg.run.tracker_mode)
    if problems:
        raise ConfigError("; ".join(problems))


def _check_gpus_visible(cfg: RecipeConfig) -> None:
    from rollcli.launch.gpu_support import check_gpus_visible

    check_gpus_visible(cfg)  # a local GPU run: its GPUs are here, torch can use them


def _check_model_here(cfg: RecipeConfig) -> None:
    from rollcli.models.loading import check_model_here

    check_model_here(cfg.model)


MACHINE_CHECKS: tuple[Callable[[RecipeConfig], None], ...] = (
    _check_gpus_visible,  # first: without the GPUs, nothing else about the machine matters
    _check_engine_installed,
    _check_backends,
    _check_trackers,
    _check_model_here,
)

"""What `roll eval` evaluates and with which model: an env name, an agentic recipe or an
RLVR recipe, and a model that is a registry name, a folder, a run id (its newest
checkpoint), or `random` or `expert` (environments only: the baselines without a model)."""

from __future__ import annotations

from pathlib import Path

from rollcli.config.errors import ConfigError
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.recipe import RecipeConfig

# env name -> the recipe whose settings (turns, reply prefix, token budget) eval uses
ENV_RECIPES = {
    "sokoban": "agentic-sokoban",
    "frozenlake": "agentic-frozenlake",
    "webshop": "webshop",
    "tool": "agentic-tool-math",
}


def resolve_eval_target(target: str, overrides: list[str]) -> tuple[RecipeConfig, str]:
    """The recipe to evaluate with: `target`'s recipe when it names an env, else the
    recipe (name, prefix or file) itself, which must be an agentic or an rlvr one."""
    from rollcli.config.loader import load_recipe
    from rollcli.launch.plugin_check import check_plugins

    cfg, source = load_recipe(ENV_RECIPES.get(target, target), overrides)
    check_plugins(cfg)  # its envs and rewards, as `roll train` checks them
    if not spec_of(cfg).engine:  # rlvr and agentic: they generate what they are scored on
        raise ConfigError(
            f"{source} is a {cfg.pipeline} recipe; roll eval plays environments and answers "
            f"held-out problems: give {', '.join(ENV_RECIPES)}, an agentic or an rlvr recipe"
        )
    return cfg, str(source)


def resolve_eval_model(
    model: str, runs_dir: Path, recipe_model: str, playing_envs: bool = True
) -> tuple[str | None, str | None]:
    """`(model_path, tokenizer_path)`: for `random` and `expert` no model, and the recipe
    model's tokenizer (prompts are built the same way); a run id gives its newest
    checkpoint."""
    from rollcli.evaluation.agentic_eval import SCRIPTED
    from rollcli.models.loading import resolve_model

    if model in SCRIPTED:
        if not playing_envs:
            raise ConfigError(
                f"--model {model} is a baseline for environments, with no model; an rlvr "
                "recipe needs a model (registry name, folder or run id)"
            )
        return None, str(resolve_model(recipe_model))
    from rollcli.runs.checkpoint import run_checkpoint

    checkpoint = run_checkpoint(model, runs_dir)  # a run id or run folder: its checkpoint
    if checkpoint is not None:
        return str(checkpoint), None
    return str(resolve_model(model)), None

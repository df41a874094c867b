"""What a resumed run may change: `roll resume RUN_ID key=value ...` (and `--resume auto`)
refuses, before anything starts, an override of the data and its order, the seed, the
model or the layout of the saved trainer state; any other change is printed and recorded
(the run's events and its status's `resumes`), so a resumed run never silently differs from
the one that stopped."""

from __future__ import annotations

from typing import Any

from rollcli.config.errors import ConfigError
from rollcli.config.recipe import RecipeConfig


def check_resumable(recorded: RecipeConfig, cfg: RecipeConfig) -> None:
    """Refuse, before anything starts, a resume whose overrides change what the run trains
    on or its trained state's layout (`resume_fixed`); other changes are printed and
    recorded (the run's events, its status's `resumes`)."""
    was, now = _flatten(recorded.model_dump()), _flatten(cfg.model_dump())
    fixed = [
        k for k in sorted(was.keys() | now.keys()) if resume_fixed(k) and was.get(k) != now.get(k)
    ]
    if fixed:
        key = fixed[0]
        raise ConfigError(
            f"{key} cannot change when a run resumes (it was {was.get(key)!r}, now "
            f"{now.get(key)!r}): the training data, its order or the saved state would not be "
            "the run's; resume without it, or start a new run from this one's checkpoint "
            "with --model RUN_ID"
        )
    algorithm = getattr(cfg, "algorithm", None)
    recorded_algorithm = getattr(recorded, "algorithm", None)
    if (
        algorithm is not None
        and recorded_algorithm is not None
        and algorithm.kl_controller == "adaptive"
        and algorithm.kl_coef != recorded_algorithm.kl_coef
    ):
        raise ConfigError(
            "algorithm.kl_coef is the adaptive KL controller's starting value, and the run "
            "continues from the coefficient it reached (the checkpoint's); it cannot change "
            "when a run resumes"
        )
    if recorded.needs_critic != cfg.needs_critic:
        raise ConfigError(
            "algorithm: this change adds or removes the critic, whose state the run's "
            "checkpoints do not hold; start a new run from this one's checkpoint with "
            "--model RUN_ID"
        )


# keys a resumed run cannot change: the data and its order, the seed, the model and the
# layout of the saved trainer state (a section prefix ends with ".")
RESUME_FIXED = ("model", "seed", "data.", "train.lora", "train.strategy", "train.num_workers")


def resume_fixed(key: str) -> bool:
    """Whether the recipe key `key` is one of `RESUME_FIXED`.

    >>> resume_fixed("data.path"), resume_fixed("train.steps"), resume_fixed("seed")
    (True, False, True)
    """
    return any(
        key == k or (k.endswith(".") and key.startswith(k)) or key.startswith(k + ".")
        for k in RESUME_FIXED
    )


def config_changes(before: RecipeConfig, after: RecipeConfig) -> list[str]:
    """`["train.steps: 8 -> 10", ...]`: the recipe keys whose values differ."""
    a, b = _flatten(before.model_dump()), _flatten(after.model_dump())
    keys = sorted(a.keys() | b.keys())
    return [f"{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]


def _flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out

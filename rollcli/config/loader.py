"""Load a recipe: YAML → overrides → algorithm preset → validation → frozen RecipeConfig.

Every failure is a `ConfigError` whose message is one line naming the key path, the bad
value and the closest valid key. Nothing in YAML is evaluated.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from rollcli.config.algorithm import AlgorithmConfig
from rollcli.config.capabilities import capability_error
from rollcli.config.catalogue import find_recipe, is_recipe_file
from rollcli.config.errors import ConfigError, did_you_mean, format_validation_error, text_field
from rollcli.config.pipeline_spec import spec_of
from rollcli.config.presets import resolve_algorithm
from rollcli.config.recipe import RECIPE_TYPES, RecipeConfig
from rollcli.config.recipe_paths import resolve_paths
from rollcli.config.recipe_scale import requested_gpus, scale_choice


def parse_override(text: str) -> tuple[list[str], Any]:
    """`train.lr=1e-5` → (["train", "lr"], 1e-5). Values are parsed as YAML scalars/lists
    (a key whose type is text keeps the text as typed: `string_overrides`)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(
            f"override {text!r} is not of the form key.path=value (e.g. train.lr=1e-5)"
        )
    parts = [p for p in key.strip().split(".")]
    if any(not p for p in parts):
        raise ConfigError(f"override {text!r} has an empty part in its key path")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return parts, parsed


def apply_overrides(
    raw: dict[str, Any],
    overrides: list[str] | dict[str, Any],
    folders: Sequence[Path] | None = None,
) -> dict[str, Any]:
    """Return a copy of `raw` with `key.path=value` overrides set (validation happens later);
    `folders`: where their relative paths and user code are looked for (`recipe_paths`)."""
    out = copy.deepcopy(raw)
    items = (
        [(k.split("."), v) for k, v in overrides.items()]
        if isinstance(overrides, dict)
        else [parse_override(o) for o in overrides]
    )
    for parts, value in items:
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                path = ".".join(parts[: i + 1])
                raise ConfigError(
                    f"cannot set {'.'.join(parts)!r}: {path!r} is a value, not a section"
                )
            node = child
        node[parts[-1]] = value
        if folders is not None:  # only what this override set is resolved (its own folders)
            one = resolve_paths(_only(parts, value), folders)
            node[parts[-1]] = _at(one, parts)
    return out


def _only(parts: list[str], value: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        tree = {part: tree}
    return tree


def _at(tree: dict[str, Any], parts: list[str]) -> Any:
    for part in parts:
        tree = tree[part]
    return tree


def string_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    r"""`raw` with each override of a text key holding the text as typed, not what YAML made
    of it: `data.answer_pattern=####\s*(.+)$` is that pattern (YAML reads a leading `#` as a
    comment: null), `data.prompt_template={question}` that template (YAML: a mapping)."""
    pipeline = raw.get("pipeline")
    model = RECIPE_TYPES.get(pipeline) if isinstance(pipeline, str) else None
    if model is None:
        return raw
    out = raw
    for text in overrides:
        parts, parsed = parse_override(text)
        value = text.partition("=")[2]
        kind = text_field(model, parts)
        if kind is None or isinstance(parsed, str):
            continue
        if kind == "optional" and value.strip() in YAML_NULLS:
            continue
        out = apply_overrides(out, {".".join(parts): value})
    return out


YAML_NULLS = ("", "null", "Null", "NULL", "~")


def validate_recipe(raw: Any, source: str = "recipe") -> RecipeConfig:
    """A raw recipe mapping → a frozen config that this build can run (or a ConfigError)."""
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{source}: a recipe must be a YAML mapping of keys, got {type(raw).__name__}"
        )
    raw = dict(raw)
    pipeline = raw.get("pipeline")
    if pipeline not in RECIPE_TYPES:
        given = "pipeline is missing" if pipeline is None else f"pipeline = {pipeline!r}"
        hint = did_you_mean(str(pipeline), list(RECIPE_TYPES)) if pipeline is not None else ""
        raise ConfigError(f"{source}: {given}{hint}; choose one of {', '.join(RECIPE_TYPES)}")
    if spec_of(pipeline).algorithm:  # the others have no algorithm: an unknown key there
        raw["algorithm"] = _resolve_algorithm(raw.get("algorithm") or {}, source)
    try:
        cfg = _RECIPE.validate_python(raw)
    except ValidationError as exc:
        raise _recipe_error(exc, pipeline, source) from None
    refusal = capability_error(cfg)
    if refusal:
        raise ConfigError(f"{source}: {refusal}")
    return cfg


_RECIPE: TypeAdapter[RecipeConfig] = TypeAdapter(RecipeConfig)


def _resolve_algorithm(algorithm: Any, source: str) -> AlgorithmConfig:
    if not isinstance(algorithm, dict):
        raise ConfigError(f"{source}: algorithm must be a mapping such as {{name: grpo}}")
    try:
        return resolve_algorithm(algorithm)
    except ValidationError as exc:
        raise format_validation_error(exc, AlgorithmConfig, ("algorithm",), source) from None
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{source}: {exc.args[0] if exc.args else exc}") from None


def _recipe_error(exc: ValidationError, pipeline: str, source: str) -> ConfigError:
    """pydantic's errors of the union start at the pipeline's tag: drop it, and say which
    pipeline a section of another pipeline belongs to."""
    errors: list[dict[str, Any]] = [{**e, "loc": e["loc"][1:]} for e in exc.errors()]
    first = errors[0]
    if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
        key = str(first["loc"][0])
        owners = [p for p, t in RECIPE_TYPES.items() if key in t.model_fields]
        if owners:
            n = len(errors) - 1
            more = f" (and {n} more problem{'s' if n > 1 else ''})" if n else ""
            return ConfigError(
                f"{source}: unknown key {key!r}: {key}.* applies to the "
                f"{_and(owners)} pipeline{'s' if len(owners) > 1 else ''}, and this "
                f"recipe's pipeline is {pipeline!r}; remove it{more}"
            )
    return format_validation_error(errors, RECIPE_TYPES[pipeline], (), source)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def load_recipe(
    ref: str,
    overrides: list[str] | None = None,
    flags: dict[str, Any] | None = None,
    *,
    saved_run: bool = False,
) -> tuple[RecipeConfig, str]:
    """Find a recipe by path/name/prefix, apply `key=value` overrides then CLI flags, validate.

    Returns the config and where it came from (catalogue name or file path). `saved_run`:
    `ref` is a run folder's recipe.yaml; one saved before recipes were typed by pipeline
    lists every pipeline's sections, and those its own pipeline lacks (never read by that
    run) are dropped before the overrides apply.
    """
    source, text = find_recipe(ref)
    if not is_recipe_file(ref):
        choice = scale_choice(ref, source, text, requested_gpus(overrides or [], flags or {}))
        if choice is not None and choice.name != source:
            source, text = find_recipe(choice.name)
    here = Path.cwd()
    recipe_dir = Path(source).expanduser().resolve().parent if is_recipe_file(ref) else None
    file_folders = [f for f in (recipe_dir, here) if f is not None]
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(
            f"{source}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    if saved_run and isinstance(raw, dict) and raw.get("pipeline") in RECIPE_TYPES:
        own = RECIPE_TYPES[raw["pipeline"]].model_fields
        foreign = {k for t in RECIPE_TYPES.values() for k in t.model_fields} - set(own)
        raw = {k: v for k, v in raw.items() if k not in foreign}
    if isinstance(raw, dict):
        raw = resolve_paths(raw, file_folders)
    if saved_run and isinstance(raw, dict):
        raw = _saved_data_defaults(raw)
    if isinstance(raw, dict):
        raw = _dataset_replaces_generator(raw, overrides or [])
    command_line = [here, *(f for f in file_folders if f != here)]
    raw = apply_overrides(raw, overrides or [], command_line)
    raw = apply_overrides(
        raw, {k: v for k, v in (flags or {}).items() if v is not None}, command_line
    )
    if isinstance(raw, dict):
        raw = string_overrides(raw, overrides or [])
        raw = resolve_paths(raw, command_line) if overrides else raw
    return validate_recipe(raw, source), source


GENERATOR_OWNED = ("source", "task", "task_args", "train_size")
LOCATION_OWNED = ("name", "split", "val_split", "val_path")


def _dataset_replaces_generator(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`data.path=...` on the command line reads that dataset instead of the recipe's: the
    recipe's keys for its own data go (its generator's `source`, `task`, `task_args`,
    `train_size`; its dataset's `name`, `split`, `val_split`, `val_path`), unless the
    command line sets them too; the column keys stay. `data.val_path` on the command line
    replaces the recipe's `val_split`, and `data.val_split` its `val_path`."""
    keys = {o.partition("=")[0].strip().removeprefix("data.") for o in overrides}
    data = raw.get("data")
    if not isinstance(data, dict):
        return _own_warmup_data(raw, overrides)
    owned: set[str] = set()
    if {"path", "train_path"} & keys:
        owned |= set(LOCATION_OWNED) | {"path", "train_path"}
        if data.get("source", "reasoning_gym") not in ("file", "mix"):
            owned |= set(GENERATOR_OWNED)
    owned |= {"val_split"} if "val_path" in keys else set()
    owned |= {"val_path"} if "val_split" in keys else set()
    kept = {k: v for k, v in data.items() if k not in owned or k in keys}
    return _own_warmup_data({**raw, "data": kept}, overrides)


def _own_warmup_data(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`warmup.data=...` on the command line: the recipe's played episodes (its
    `warmup.policy`, `warmup.episodes`) go, unless the command line sets them too."""
    keys = {o.partition("=")[0].strip() for o in overrides}
    warmup = raw.get("warmup")
    if "warmup.data" not in keys or not isinstance(warmup, dict):
        return raw
    played = {"policy", "episodes"} - {k.removeprefix("warmup.") for k in keys}
    return {**raw, "warmup": {k: v for k, v in warmup.items() if k not in played}}


def _saved_data_defaults(raw: dict[str, Any]) -> dict[str, Any]:
    """A run saved before datasets were sampled wrote `data.train_path` and every default:
    its `train_size` (2000) and `val_size` (256) did not apply to a file then, so they do
    not now (the resumed run reads the same rows)."""
    data = raw.get("data")
    if not isinstance(data, dict) or data.get("train_path") is None:
        return raw
    data = {**data, "train_size": None}
    if data.get("val_path") is not None:
        data["val_size"] = None
    return {**raw, "data": data}


def dump_recipe(cfg: RecipeConfig) -> str:
    """The resolved recipe as YAML (what a run saves as recipe.yaml)."""
    text: str = yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
    return text


__all__ = [
    "ConfigError",
    "apply_overrides",
    "did_you_mean",
    "dump_recipe",
    "load_recipe",
    "validate_recipe",
]

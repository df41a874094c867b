"""The recipe catalogue: YAML files shipped in `rollcli.recipes`, found by name or prefix."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from rollcli.config.errors import ConfigError, did_you_mean


@dataclass(frozen=True)
class CatalogueEntry:
    name: str
    pipeline: str
    model: str
    description: str
    text: str
    aliases: tuple[str, ...] = ()


def _recipe_files() -> dict[str, str]:
    folder = resources.files("rollcli.recipes")
    return {
        f.name[: -len(".yaml")]: f.read_text(encoding="utf-8")
        for f in folder.iterdir()
        if f.name.endswith(".yaml")
    }


def catalogue() -> list[CatalogueEntry]:
    entries = []
    for name, text in sorted(_recipe_files().items()):
        raw = yaml.safe_load(text) or {}
        entries.append(
            CatalogueEntry(
                name=name,
                pipeline=str(raw.get("pipeline", "?")),
                model=str(raw.get("model", "smollm2-135m")),
                description=str(raw.get("description", "")).strip(),
                text=text,
                aliases=tuple(str(a) for a in raw.get("aliases") or ()),
            )
        )
    return entries


def is_recipe_file(ref: str) -> bool:
    """Whether `ref` names a recipe file (not a catalogue name)."""
    path = Path(ref).expanduser()
    return path.suffix in (".yaml", ".yml") or path.is_file()


def find_recipe(ref: str) -> tuple[str, str]:
    """Return `(source, yaml_text)` for a recipe file, catalogue name, alias, or unique prefix."""
    path = Path(ref).expanduser()
    if is_recipe_file(ref):
        if not path.is_file():
            raise ConfigError(f"recipe file {ref!r} does not exist")
        return str(path), path.read_text(encoding="utf-8")
    files = _recipe_files()
    if ref in files:
        return ref, files[ref]
    aliased = [
        name
        for name, text in files.items()
        if ref in ((yaml.safe_load(text) or {}).get("aliases") or [])
    ]
    if len(aliased) == 1:
        return aliased[0], files[aliased[0]]
    matches = sorted(name for name in files if name.startswith(ref))
    if len(matches) == 1:
        return matches[0], files[matches[0]]
    if len(matches) > 1:
        raise ConfigError(f"recipe {ref!r} is ambiguous: it matches {', '.join(matches)}")
    raise ConfigError(
        f"no recipe named {ref!r}{did_you_mean(ref, list(files))}; `roll recipes ls` lists them"
    )

"""Paths and user code in a recipe, made absolute when the recipe is loaded.

A relative path in a recipe file is relative to the recipe's folder; one typed on the
command line, to the current folder. Either is looked for in the other folder too, so a
`reward.fn=./my_reward.py:score` next to the recipe works from anywhere. A path found is
stored absolute in the resolved recipe (the run's `recipe.yaml`), so a resumed run and
every worker read the same files. A value that is no local path (a hub dataset or model
name, a registry name, a built-in reward) is kept as written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from rollcli.config.user_code import resolve_ref

# key paths whose values are files or folders ("*": every key of a mapping)
PATH_KEYS: tuple[tuple[str, ...], ...] = (
    ("model",),
    ("data", "path"),
    ("data", "train_path"),
    ("data", "val_path"),
    ("data", "mix", "*", "path"),
    ("data", "mix", "*", "train_path"),
    ("data", "mix", "*", "val_path"),
    ("distill", "student"),
    ("warmup", "data"),
)
# key paths whose values are user code ("[]": every item of a list)
CODE_KEYS: tuple[tuple[str, ...], ...] = (
    ("reward", "fn"),
    ("reward", "routes", "*"),
    ("agentic", "agent"),
    ("agentic", "env"),
    *(
        ("agentic", kwargs, key)
        for kwargs in ("env_kwargs", "val_env_kwargs")
        for key in ("tasks", "check", "tools[]")
    ),
)


def resolve_paths(raw: dict[str, Any], folders: Sequence[Path]) -> dict[str, Any]:
    """`raw` with its relative paths and user code resolved against `folders`, in order."""
    out: dict[str, Any] = _copy(raw)
    for keys in PATH_KEYS:
        _rewrite(out, keys, lambda value, where: _local_path(value, folders))
    for keys in CODE_KEYS:
        _rewrite(out, keys, lambda value, where: resolve_ref(value, folders, where))
    return out


def _local_path(value: str, folders: Sequence[Path]) -> str:
    path = Path(value).expanduser()
    if path.is_absolute():
        return str(path)
    for folder in folders:
        candidate = folder / path
        if candidate.exists():
            return str(candidate.resolve())
    return value


def _rewrite(tree: dict[str, Any], keys: tuple[str, ...], fix: Callable[[str, str], str]) -> None:
    for parent, key, where in _places(tree, keys, ""):
        value = parent[key]
        if isinstance(value, str):
            parent[key] = fix(value, where)
        elif isinstance(value, list) and where.endswith("[]"):
            parent[key] = [fix(v, where[:-2]) if isinstance(v, str) else v for v in value]


def _places(node: Any, keys: tuple[str, ...], at: str) -> Iterator[tuple[dict[str, Any], str, str]]:
    """(parent mapping, key, dotted path) of each place `keys` names in `node`."""
    if not isinstance(node, dict) or not keys:
        return
    head, rest = keys[0], keys[1:]
    names = list(node) if head == "*" else [head.removesuffix("[]")]
    for name in names:
        if name not in node:
            continue
        where = f"{at}{name}"
        if rest:
            yield from _places(node[name], rest, f"{where}.")
        else:
            yield node, name, where + ("[]" if head.endswith("[]") else "")


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node

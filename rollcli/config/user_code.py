"""User code a recipe names: rewards, agent programs, tools, task sources, env factories.

A reference is `package.module:function` (importable: installed, or on `PYTHONPATH`) or
`path/to/file.py:function`. When a recipe is loaded (`rollcli.config.recipe_paths`), a file
reference becomes absolute (resolved against the recipe's folder, then the current one),
and a module reference that does not import as it is but names a file under one of those
folders becomes that file's absolute reference. So the resolved recipe, saved in the run,
names code that every process of the run (the reward and env workers, a resumed run
started elsewhere) loads the same way, without `PYTHONPATH`.

A file is loaded under a name of its own (`roll_user_code_<stem>_<hash>`), so `reward.py`
next to a recipe never shadows or is shadowed by an installed module of that name; its
folder is appended to `sys.path` for the helpers it imports. A file inside a package (its
folder has an `__init__.py`) is imported by its dotted name, so its relative imports work.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rollcli.config.errors import ConfigError


def is_file_ref(ref: str) -> bool:
    """A `path/to/file.py:function` reference (not `package.module:function`).

    >>> is_file_ref("./rewards/my_reward.py:score"), is_file_ref("my_pkg.rewards:score")
    (True, False)
    """
    target = ref.rpartition(":")[0]
    return target.endswith(".py") or "/" in target


def resolve_ref(ref: str, folders: Sequence[Path], key: str) -> str:
    """`ref` as the resolved recipe stores it (see the module docstring); `key` names the
    recipe key in errors. A ref that is not user code (a built-in name) is returned as is."""
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        return ref
    if is_file_ref(ref):
        for folder in folders:
            path = (folder / target).expanduser()
            if path.is_file():
                return f"{path.resolve()}:{attr}"
        looked = ", ".join(str(f) for f in folders)
        raise ConfigError(f"{key} = {ref!r}: no file {target!r} (looked in {looked})")
    if _importable(target):
        return ref
    for folder in folders:
        found = _module_file(folder, target)
        if found is not None:
            return f"{found}:{attr}"
    return ref  # imported by the checks before a run (`roll plan` of a cluster's recipe
    # loads it on a laptop without that code), which say where it was looked for


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def _module_file(folder: Path, module: str) -> Path | None:
    base = folder.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.resolve()
    return None


def load_object(ref: str, what: str, folders: Sequence[Path] = ()) -> Any:
    """The object `ref` names (`module:attr` or `file.py:attr`); `what` is the recipe key
    in errors (a `ValueError` naming where it looked). `folders`: where a module or file
    not yet resolved is looked for, in order (the current folder, for `roll reward`)."""
    if folders:
        ref = resolve_ref(ref, folders, what)
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise ValueError(
            f"{what} = {ref!r}: name user code as 'package.module:function' or "
            "'path/to/file.py:function'"
        )
    module = _load_file(Path(target), what, ref) if is_file_ref(ref) else _import(target, what, ref)
    if not hasattr(module, attr):
        raise ValueError(f"{what} = {ref!r}: {target} has no {attr!r}")
    return getattr(module, attr)


def _import(name: str, what: str, ref: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ValueError(
            f"{what} = {ref!r}: cannot import {name!r} ({exc}); it was looked for among the "
            "installed packages, on PYTHONPATH, next to the recipe and in the current folder: "
            "install it, or name its file as 'path/to/file.py:function'"
        ) from None


def _load_file(path: Path, what: str, ref: str) -> Any:
    if not path.is_file():
        raise ValueError(f"{what} = {ref!r}: no file {str(path)!r}")
    path = path.resolve()
    root, parts = path.parent, [path.stem]
    while (root / "__init__.py").is_file():  # inside a package: import it by its name
        parts.insert(0, root.name)
        root = root.parent
    if len(parts) > 1:
        if str(root) not in sys.path:
            sys.path.append(str(root))
        module = _import(".".join(parts), what, ref)
        if Path(getattr(module, "__file__", "") or "").resolve() != path:
            raise ValueError(
                f"{what} = {ref!r}: the package {parts[0]!r} found first is another one "
                f"({module.__file__}); rename yours"
            )
        return module
    name = f"roll_user_code_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))  # the helpers it imports from its folder
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, Exception):
            raise ValueError(
                f"{what} = {ref!r}: importing {path} failed: {type(exc).__name__}: {exc}"
            ) from exc
        raise
    return module

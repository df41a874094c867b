"""The environment registry: text environments registered by name.

Example:
    >>> from rollcli.envs.registry import register_env, make
    >>> @register_env("echo-doc", description="repeats the action")  # doctest: +SKIP
    ... class Echo(gymnasium.Env): ...
    >>> env = make("echo-doc")  # doctest: +SKIP

Built-in environments live in modules listed in `BUILTIN_MODULES`; they are imported lazily
the first time the registry is read, so `import rollcli.envs` stays cheap.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Modules that register built-in environments when imported (filled in as envs are added).
BUILTIN_MODULES: list[str] = [
    "rollcli.envs.sokoban",
    "rollcli.envs.frozenlake",
    "rollcli.envs.webshop",
    "rollcli.envs.tools",
]


@dataclass(frozen=True)
class EnvSpec:
    name: str
    factory: Callable[..., Any]
    description: str = ""


ENV_REGISTRY: dict[str, EnvSpec] = {}
_builtins_loaded = False


def register_env(
    name: str, description: str = ""
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Class (or factory) decorator: register an environment under `name`."""

    def wrap(factory: Callable[..., Any]) -> Callable[..., Any]:
        if name in ENV_REGISTRY and ENV_REGISTRY[name].factory is not factory:
            raise ValueError(f"environment {name!r} is already registered")
        ENV_REGISTRY[name] = EnvSpec(name, factory, description)
        return factory

    return wrap


def _load_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module in BUILTIN_MODULES:
            importlib.import_module(module)


def env_names() -> list[str]:
    _load_builtins()
    return sorted(ENV_REGISTRY)


def get_spec(name: str) -> EnvSpec:
    _load_builtins()
    if name not in ENV_REGISTRY:
        close = difflib.get_close_matches(name, ENV_REGISTRY, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(
            f"unknown environment {name!r}{hint}; registered: {', '.join(sorted(ENV_REGISTRY))}"
        )
    return ENV_REGISTRY[name]


def make(name: str, **kwargs: Any) -> Any:
    """Build a registered environment: `make("sokoban", dim_room=(6, 6))`."""
    return get_spec(name).factory(**kwargs)


def env_factory(env: str) -> Any:
    """The class or function that builds `env` (a registered name or ``"module:factory"``)."""
    if ":" in env:
        from rollcli.config.user_code import load_object

        return load_object(env, "agentic.env")
    return get_spec(env).factory


def build_env(env: str, kwargs: dict[str, Any]) -> Any:
    """A registered env by name, or a user factory given as ``"package.module:factory"``."""
    return env_factory(env)(**kwargs)

"""Which tools a recipe names: a built-in by its name, a user's own function as
``"package.module:function"`` (the way roll plugs in all user code).

Built-ins: ``calculator`` (`rollcli.envs.tools.calculator`) and ``python``
(`rollcli.envs.tools.python_tool`, built with the env's tool time limit).

Example:
    >>> [t.name for t in load_tools(["calculator"], timeout_s=5.0)]
    ['calculator']
    >>> load_tools(["calculater"], timeout_s=5.0)
    Traceback (most recent call last):
    ...
    ValueError: unknown tool 'calculater' (did you mean 'calculator'?); built-in tools: calculator, python, or give your own as 'package.module:function'
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any

from rollcli.envs.tools.calculator import calculator
from rollcli.envs.tools.tool import Tool


def _python(timeout_s: float) -> Tool:
    from rollcli.envs.tools.python_tool import python_tool

    return Tool.from_function(python_tool(timeout_s=timeout_s), bounded=True)


BUILTIN_TOOLS: dict[str, Callable[[float], Tool]] = {
    "calculator": lambda timeout_s: Tool.from_function(calculator, bounded=True),
    "python": _python,
}


def load_tools(refs: Sequence[str], timeout_s: float) -> list[Tool]:
    """The tools named by `refs`, in order; names must be unique."""
    if isinstance(refs, str) or not refs:
        raise ValueError(f"tools must be a non-empty list of tool names, got {refs!r}")
    tools = []
    for ref in refs:
        if not isinstance(ref, str):
            raise ValueError(f"a tool is a name or 'package.module:function', got {ref!r}")
        if ref in BUILTIN_TOOLS:
            tools.append(BUILTIN_TOOLS[ref](timeout_s))
        elif ":" in ref:
            tools.append(Tool.from_function(load_function(ref, "tool")))
        else:
            close = difflib.get_close_matches(ref, BUILTIN_TOOLS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"unknown tool {ref!r}{hint}; built-in tools: {', '.join(BUILTIN_TOOLS)}, "
                "or give your own as 'package.module:function'"
            )
    names = [t.name for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two tools are named {twice[0]!r}; tool names must be unique")
    return tools


def load_function(ref: str, what: str) -> Callable[..., Any]:
    """The function ``"package.module:function"`` or ``"path/to/file.py:function"`` names
    (`rollcli.config.user_code`); `what` it is for goes in errors."""
    from rollcli.config.user_code import load_object

    fn = load_object(ref, what)
    if not callable(fn):
        raise ValueError(f"{what} {ref!r} is not a function")
    return fn

"""`Tool`: a plain Python function the model may call, with the JSON schema it is shown.

A tool is an ordinary function with a type hint on every argument and a Google-style
docstring (a description, then an ``Args:`` line per argument). Its schema is derived by
`transformers.utils.get_json_schema`, the same function chat templates' ``tools=`` use, so
there is no schema code of ours to drift from what the model sees. Arguments a model sends
are checked against that schema with `jsonschema` (no argument the schema lacks, every
required one present, each of its declared type) before the function runs.

A call runs in this process. A tool that limits its own running time (`bounded`: the
built-ins) is called directly; any other runs in a daemon thread with a deadline, and a
call past it is reported as timed out. Python cannot stop a thread, so a user tool that
may hang should bound itself (as `python` does with the sandbox): a hung call keeps its
thread until it returns.

Example:
    >>> def add(a: int, b: int = 0) -> int:
    ...     '''Add two integers.
    ...
    ...     Args:
    ...         a: the first
    ...         b: the second
    ...     '''
    ...     return a + b
    >>> tool = Tool.from_function(add)
    >>> tool.schema["function"]["parameters"]["required"]
    ['a']
    >>> tool.check_arguments({"a": 1, "c": 2})
    "unexpected argument 'c'"
    >>> tool.check_arguments({"a": "1"})
    "argument 'a': '1' is not of type 'integer'"
    >>> tool.call({"a": 2, "b": 3}, timeout_s=1.0)
    5
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from rollcli.rewards.runner import in_thread_with_deadline


class ToolError(Exception):
    """Raised by a tool to report a failure in its own words: the model sees the message
    as it is (other exceptions are shown as ``Type: message``)."""


class ToolDefinitionError(ValueError):
    """A function cannot be a tool (no type hints, no docstring); one line for the user."""


@dataclass(frozen=True)
class Tool:
    name: str
    fn: Callable[..., Any] = field(repr=False)
    schema: dict[str, Any] = field(repr=False)  # {"type": "function", "function": {...}}
    bounded: bool = False  # the function bounds its own running time (no deadline thread)

    @classmethod
    def from_function(cls, fn: Callable[..., Any], bounded: bool = False) -> Tool:
        """The tool for `fn`, its schema derived from its type hints and docstring."""
        from transformers.utils import get_json_schema
        from transformers.utils.chat_template_utils import (
            DocstringParsingException,
            TypeHintParsingException,
        )

        where = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', fn)}"
        try:
            schema = get_json_schema(fn)
        except (DocstringParsingException, TypeHintParsingException) as exc:
            raise ToolDefinitionError(
                f"tool {where} cannot be described to the model: {exc} (a tool needs a type "
                "hint on every argument and a Google-style docstring with an Args: line each)"
            ) from None
        return cls(schema["function"]["name"], fn, schema, bounded)

    @cached_property
    def _validator(self) -> Draft202012Validator:
        params = _strict(self.schema["function"].get("parameters") or {"type": "object"})
        return Draft202012Validator(params)

    def check_arguments(self, arguments: Any) -> str | None:
        """Why `arguments` do not fit the schema (one line), or None when they do."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        error = best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        if error.validator == "additionalProperties":
            extra = sorted(set(arguments) - set(error.schema.get("properties", {})))
            return f"unexpected argument {', '.join(map(repr, extra))}"
        if error.absolute_path:
            return f"argument {error.absolute_path[0]!r}: {error.message}"
        return error.message

    def call(self, arguments: dict[str, Any], timeout_s: float) -> Any:
        """Run the tool on checked `arguments`; raises what it raises, or `TimeoutError`
        after `timeout_s` (unbounded tools only)."""
        if self.bounded:
            return self.fn(**arguments)
        late = TimeoutError(f"the tool ran past its {timeout_s:g} s limit")
        return in_thread_with_deadline(
            timeout_s, f"tool-{self.name}", late, lambda: self.fn(**arguments)
        )


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The parameters schema as a validator reads it: no extra arguments, and the
    OpenAPI-style ``nullable: true`` that transformers writes for ``X | None`` as JSON
    Schema's ``type: [X, "null"]``."""
    schema = copy.deepcopy(schema)
    schema.setdefault("additionalProperties", False)
    for prop in schema.get("properties", {}).values():
        if prop.pop("nullable", False) and isinstance(prop.get("type"), str):
            prop["type"] = [prop["type"], "null"]
    return schema

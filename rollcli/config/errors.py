"""Config errors as one readable line: the key path, the bad value, the closest valid key."""

from __future__ import annotations

import difflib
import textwrap
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError


def wrap(message: str, lead: str = "error: ", width: int = 80, indent: str = "  ") -> str:
    """`message` in lines of at most `width` columns once printed after `lead`, continued
    lines starting with `indent`; no key, path or word is broken (one longer than a line
    has a line of its own). Returned without `lead`, which the caller prints (styled).

    >>> print(wrap("data.path: " + "x" * 60 + " does not exist", width=40))
    data.path:
      xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
      does not exist
    >>> print("12:00:00  " + wrap("run r started: model m (/a/b)", "12:00:00  ", 30, " " * 10))
    12:00:00  run r started: model
              m (/a/b)
    """
    lines = textwrap.wrap(
        message,
        width,
        initial_indent=lead,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    return "\n".join(lines)[len(lead) :]


class ConfigError(ValueError):
    """A recipe or override is invalid. The message is one line, ready to show a user."""


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside an annotation such as `X`, `X | None`, `Annotated[X, ...]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _submodel(arg)
            if found is not None:
                return found
    return None


def valid_keys(model: type[BaseModel], path: tuple[str, ...]) -> list[str]:
    """The keys allowed at `path` inside `model` (empty if the path leaves the schema)."""
    for part in path:
        field = model.model_fields.get(part)
        sub = _submodel(field.annotation) if field else None
        if sub is None:
            return []
        model = sub
    return list(model.model_fields)


def text_field(model: type[BaseModel], path: list[str]) -> str | None:
    """ "text" when the key at `path` inside `model` holds text (a `str`, or `Literal`s of
    text), "optional" when it holds text or None, else None (numbers, lists, mappings, a
    path that leaves the schema)."""
    parts = list(path)
    while len(parts) > 1:
        field = model.model_fields.get(parts.pop(0))
        annotation = field.annotation if field else None
        if typing.get_origin(annotation) is dict:  # `data.mix.<domain>.`: a mapping's value
            annotation = typing.get_args(annotation)[1]
            parts.pop(0)
        sub = _submodel(annotation)
        if sub is None or not parts:
            return None
        model = sub
    field = model.model_fields.get(parts[0]) if parts else None
    if field is None:
        return None
    args = typing.get_args(field.annotation)
    options = (
        args
        if typing.get_origin(field.annotation) in (typing.Union, types.UnionType)
        else (field.annotation,)
    )
    optional = type(None) in options
    kinds = [a for a in options if a is not type(None)]
    textual = all(
        a is str
        or (
            typing.get_origin(a) is typing.Literal
            and all(isinstance(v, str) for v in typing.get_args(a))
        )
        for a in kinds
    )
    if not kinds or not textual:
        return None
    return "optional" if optional else "text"


def did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(err: Mapping[str, Any], model: type[BaseModel], prefix: tuple[str, ...]) -> str:
    loc = tuple(str(p) for p in err["loc"])
    path = ".".join(prefix + loc)
    if err["type"] == "extra_forbidden":
        parent = prefix + loc[:-1]
        choices = valid_keys(model, loc[:-1])
        close = difflib.get_close_matches(loc[-1], choices, n=1, cutoff=0.5)
        hint = f" (did you mean {'.'.join(parent + (close[0],))!r}?)" if close else ""
        if not hint and choices:
            hint = f" (valid keys: {', '.join(choices)})"
        return f"unknown key {path!r}{hint}"
    value = err.get("input")
    shown = repr(value) if not isinstance(value, dict) else "{...}"
    msg: str = err["msg"]
    if err["type"] == "model_type":
        msg = "this is a section; give it as a mapping of keys (e.g. {key: value})"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if not loc or msg.startswith(f"{path}.") or f"'{path}." in msg:
        return msg  # the message already names the key inside this section
    return f"{path} = {shown}: {msg}"


def format_validation_error(
    exc: ValidationError | list[Any],
    model: type[BaseModel],
    prefix: tuple[str, ...] = (),
    source: str = "",
) -> ConfigError:
    """Turn pydantic's multi-line error into one line (the first problem, plus a count);
    `exc` may be its list of errors, already relocated to `model`."""
    errors = exc.errors() if isinstance(exc, ValidationError) else exc
    first = _describe(errors[0], model, prefix)
    more = (
        f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        if len(errors) > 1
        else ""
    )
    where = f"{source}: " if source else ""
    return ConfigError(f"{where}{first}{more}")

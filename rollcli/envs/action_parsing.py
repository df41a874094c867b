"""Turn a model's free-form reply into one of an environment's action names.

By default the answer is the content of the LAST ``<answer>...</answer>`` block (the model
may think aloud before it, and may quote the tag in its reasoning). The answer is matched
case-insensitively against the action set, ignoring surrounding whitespace and punctuation
such as quotes, full stops or Markdown emphasis. Anything else is an invalid action, with a
human-readable reason that a pipeline can log or show back to the model.

Examples:
    >>> actions = ["Up", "Down", "Left", "Right"]
    >>> parse_action("I should push the box. <answer>up</answer>", actions)
    ParsedAction(action='Up', valid=True, reason='ok')
    >>> parse_action("<answer>Left</answer> no wait <answer> **RIGHT.** </answer>", actions)
    ParsedAction(action='Right', valid=True, reason='ok')
    >>> parse_action("Up", actions).valid
    False
    >>> parse_action("<answer>jump</answer>", actions).reason
    "unknown action 'jump'; expected one of Up, Down, Left, Right"
    >>> parse_action("Action: down", actions, pattern=r"action:\\s*(\\w+)")
    ParsedAction(action='Down', valid=True, reason='ok')
    >>> parse_action("  left! ", actions, pattern=None)
    ParsedAction(action='Left', valid=True, reason='ok')
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_ANSWER_PATTERN = r"<answer>(.*?)</answer>"
"""Regex for the answer: the last match's first group (or whole match) is the action."""

# Characters stripped from both ends of the answer before matching it to an action name.
_SURROUNDING = " \t\r\n.,;:!?'\"`*_()[]{}<>"


@dataclass(frozen=True)
class ParsedAction:
    """The outcome of parsing: the canonical action name, or None with the reason why not."""

    action: str | None
    valid: bool
    reason: str


def parse_action(
    text: str,
    action_names: Sequence[str],
    pattern: str | None = DEFAULT_ANSWER_PATTERN,
) -> ParsedAction:
    """Parse `text` into one of `action_names` (returned in its canonical spelling).

    Args:
        text: the model's reply.
        action_names: the legal actions, e.g. ``["Up", "Down", "Left", "Right"]``.
        pattern: a regex searched case-insensitively across lines; the LAST match is the
            answer (its first capture group if it has one, else the whole match).
            ``None`` takes the whole text as the answer.
    """
    if not isinstance(text, str):
        return ParsedAction(None, False, f"expected text, got {type(text).__name__}")
    if pattern is None:
        answer = text
    else:
        matches = list(re.finditer(pattern, text, flags=re.IGNORECASE | re.DOTALL))
        if not matches:
            return ParsedAction(None, False, f"no answer matching {pattern!r} found")
        last = matches[-1]
        answer = last.group(1) if last.re.groups else last.group(0)
        answer = answer or ""
    cleaned = answer.strip(_SURROUNDING)
    if not cleaned:
        return ParsedAction(None, False, "empty answer")
    by_folded = {name.casefold(): name for name in action_names}
    canonical = by_folded.get(" ".join(cleaned.split()).casefold())
    if canonical is None:
        expected = ", ".join(action_names)
        return ParsedAction(None, False, f"unknown action {cleaned!r}; expected one of {expected}")
    return ParsedAction(canonical, True, "ok")

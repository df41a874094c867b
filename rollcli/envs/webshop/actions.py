"""Read a WebShop action out of a model's reply.

The action is the content of the LAST ``<answer>...</answer>`` block, or the whole reply when
there is none; it must then be ``search[keywords]`` or ``click[value]``. Case of the verb and
spaces around the brackets are forgiven; the argument keeps its text (clicks are matched
case-insensitively by the environment). A reply that opens ``<answer>`` and never closes it
(small models run on past their action) is read from the last opening tag: the action is the
``search[...]`` / ``click[...]`` right after it, and what follows its closing bracket is ignored.

Examples:
    >>> parse_webshop_action("I'll look. <answer>search[red running shoes]</answer>")
    ('search', 'red running shoes')
    >>> parse_webshop_action("<answer>click[x]</answer> then <answer> Click[ Buy Now ] </answer>")
    ('click', 'Buy Now')
    >>> parse_webshop_action("click[b07xyz]")
    ('click', 'b07xyz')
    >>> parse_webshop_action("<answer>search[dark chocolate] Question: what is ...")
    ('search', 'dark chocolate')
    >>> parse_webshop_action("<answer>buy it</answer>") is None
    True
    >>> parse_webshop_action("<answer>buy it") is None
    True
    >>> parse_webshop_action("<answer>search[shoes] and more</answer>") is None  # closed: strict
    True
"""

from __future__ import annotations

import re

from rollcli.envs.action_parsing import DEFAULT_ANSWER_PATTERN

_ANSWER = re.compile(DEFAULT_ANSWER_PATTERN, re.IGNORECASE | re.DOTALL)
_ACTION = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_LEADING_ACTION = re.compile(r"\s*(search|click)\s*\[([^\]\n]*)\]", re.IGNORECASE)


def extract_answer(text: str) -> str:
    """The last ``<answer>`` block's content, or the whole text."""
    matches = _ANSWER.findall(text)
    return matches[-1] if matches else text


def parse_webshop_action(text: str) -> tuple[str, str] | None:
    """``(verb, argument)`` with verb "search" or "click", or None when malformed."""
    if not isinstance(text, str):
        return None
    match = _ACTION.match(extract_answer(text).strip())
    if match is None:
        opened = list(_OPEN.finditer(text))
        if not opened or _ANSWER.search(text, opened[-1].start()):
            return None
        match = _LEADING_ACTION.match(text, opened[-1].end())
        if match is None:
            return None
    return match.group(1).lower(), " ".join(match.group(2).split())

"""Seeded IFEval-style prompts: a short writing task plus one to three checkable constraints.

Each item is `(instruction, constraints)`; the constraints are what the `ifeval` reward checks.
The same seed gives the same items.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

TOPICS = (
    "the ocean",
    "a rainy morning",
    "learning to cook",
    "a city at night",
    "your favourite book",
    "the history of bicycles",
    "a trip to the mountains",
    "why sleep matters",
    "a friendly robot",
    "the first day of school",
    "saving money",
    "a garden in spring",
)
TASKS = ("Write a short paragraph about {}.", "Describe {}.", "Write a few sentences about {}.")
KEYWORDS = ("light", "quiet", "green", "simple", "bright", "small", "warm", "fast")

Maker = Callable[[random.Random], tuple[str, dict[str, Any]]]


def _lowercase(r: random.Random) -> tuple[str, dict[str, Any]]:
    return "Use only lowercase letters.", {"type": "lowercase"}


def _no_commas(r: random.Random) -> tuple[str, dict[str, Any]]:
    return "Do not use any commas.", {"type": "no_commas"}


def _max_words(r: random.Random) -> tuple[str, dict[str, Any]]:
    n = r.choice((15, 20, 30, 40))
    return f"Use at most {n} words.", {"type": "word_count", "max": n}


def _keyword(r: random.Random) -> tuple[str, dict[str, Any]]:
    k = r.choice(KEYWORDS)
    return f"Include the word '{k}'.", {"type": "include_keywords", "keywords": [k]}


def _title(r: random.Random) -> tuple[str, dict[str, Any]]:
    return "Start with a title in double angular brackets, like <<title>>.", {"type": "title"}


def _ends_with(r: random.Random) -> tuple[str, dict[str, Any]]:
    phrase = r.choice(("The end.", "That is all.", "Thank you."))
    return f"End your answer with the exact phrase '{phrase}'.", {
        "type": "ends_with",
        "phrase": phrase,
    }


def _bullets(r: random.Random) -> tuple[str, dict[str, Any]]:
    n = r.choice((2, 3))
    return f"Answer with exactly {n} bullet points starting with '* '.", {
        "type": "bullet_count",
        "min": n,
        "max": n,
    }


MAKERS: tuple[Maker, ...] = (
    _lowercase,
    _no_commas,
    _max_words,
    _keyword,
    _title,
    _ends_with,
    _bullets,
)


def ifeval_items(size: int, seed: int, max_constraints: int = 2) -> list[tuple[str, list[dict]]]:
    """`size` seeded `(instruction, constraints)` items with distinct constraint types.

    >>> ifeval_items(2, 0) == ifeval_items(2, 0)
    True
    >>> text, constraints = ifeval_items(1, 3)[0]
    >>> len(constraints) >= 1 and text.count(".") >= 2
    True
    """
    r = random.Random(seed)
    items = []
    for _ in range(size):
        task = r.choice(TASKS).format(r.choice(TOPICS))
        makers = r.sample(MAKERS, r.randint(1, max_constraints))
        parts = [m(r) for m in makers]
        text = " ".join([task, *(p[0] for p in parts)])
        items.append((text, [p[1] for p in parts]))
    return items

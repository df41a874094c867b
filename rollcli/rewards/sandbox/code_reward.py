"""A reward function for code RL: extract the code, score it against tests."""

from __future__ import annotations

import re

from .api import run_humaneval, run_tests
from .limits import SandboxLimits

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_code(response: str) -> str:
    """The last fenced Python block of a model response, else the whole text.

    >>> extract_code("Here:\\n```python\\nx = 1\\n```\\nand\\n```python\\nx = 2\\n```")
    'x = 2\\n'
    >>> extract_code("print('no fences')")
    "print('no fences')"
    """
    blocks = _FENCE.findall(response)
    return blocks[-1] if blocks else response


def code_reward(
    response: str,
    tests: str | list[str],
    *,
    entry_point: str | None = None,
    limits: SandboxLimits | None = None,
) -> float:
    """Fraction of ``tests`` the code in ``response`` passes, in [0, 1].

    ``tests`` are assert-style snippets (a string holds one per line), or,
    with ``entry_point``, a HumanEval-style source defining ``check(candidate)``.

    >>> code_reward("```python\\ndef add(a, b):\\n    return a + b\\n```", ["assert add(1, 2) == 3"])
    1.0
    >>> code_reward("def add(a, b): return a - b", ["assert add(1, 2) == 3", "assert add(0, 0) == 0"])
    0.5
    >>> code_reward("def add(a, b): return a + b",
    ...             "def check(candidate):\\n    assert candidate(2, 2) == 4\\n", entry_point="add")
    1.0
    """
    code = extract_code(response)
    lim = limits or SandboxLimits()
    if entry_point is not None:
        text = tests if isinstance(tests, str) else "\n".join(tests)
        return run_humaneval(code, "", text, entry_point, limits=lim).reward
    return run_tests(code, tests, limits=lim).reward

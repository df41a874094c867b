"""Tool tasks: what an episode asks, the answer it expects, and how an answer is judged.

A task source is a function of a seed that returns one task dict, ``{"prompt": str,
"answer": str | number}`` (other keys are refused), so an episode's task is a function of
its env seed, as a map is for FrozenLake. Built in: ``arithmetic`` (`arithmetic`); a
user's own is named ``"package.module:function"`` and called as ``fn(seed=..., **kwargs)``
(a fixed list can return ``TASKS[seed % len(TASKS)]``).

Held-out tasks: `TaskSource` with ``split="train"`` or ``"validation"`` keeps drawing until
a task of that split comes up, a task's split being a fixed function of its prompt
(`rollcli.envs.layout_split`), so validation tasks never occur in training whatever the
seeds.

Judges score a final answer against the expected one: ``math`` (roll's math answer check,
`rollcli.rewards.math_rule.verify_answer`: 1 when equal as numbers or expressions),
``exact`` (equal text, ignoring case and surrounding space), or a user's
``"package.module:function"`` taking ``(answer, expected)`` and returning a number.

Example:
    >>> arithmetic(seed=7)
    {'prompt': 'What is 254 × 504 - 766?', 'answer': '127250'}
    >>> TaskSource("arithmetic", split="validation").task(3)
    ToolTask(prompt='What is 162 × 748 - 172?', answer='121004')
    >>> judge("math")("127,250", "127250"), judge("exact")("Paris ", "paris")
    (1.0, 1.0)
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollcli.envs.layout_split import LAYOUTS, MAX_DRAWS, layout_split
from rollcli.envs.tools.catalog import load_function

MAX_ANSWER_CHARS = 200  # longer answers are not parsed by the math judge (it has no timeout)
_PLAIN_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
ARITHMETIC_KINDS = ("product", "chain")
ARITHMETIC_PROMPT = "What is {}?"
_ARITHMETIC_ASKS = re.compile(r"What is ([\d\s()+\-×*/]+)\?")


@dataclass(frozen=True)
class ToolTask:
    prompt: str
    answer: str

    @classmethod
    def from_dict(cls, data: Any, source: str) -> ToolTask:
        """Check a task source's dict; one line naming the source when it is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(
                f"tasks {source!r} returned {type(data).__name__}; a task source returns one "
                "task dict per seed, {'prompt': ..., 'answer': ...}"
            )
        unknown = sorted(set(data) - {"prompt", "answer"})
        missing = sorted({"prompt", "answer"} - set(data))
        if unknown or missing:
            what = f"unknown keys {unknown}" if unknown else f"no {missing[0]!r}"
            raise ValueError(f"tasks {source!r}: a task has {what}; it has 'prompt' and 'answer'")
        if not isinstance(data["prompt"], str) or not data["prompt"].strip():
            raise ValueError(f"tasks {source!r}: a task's prompt must be non-empty text")
        return cls(data["prompt"], str(data["answer"]).strip())

    @property
    def numeric(self) -> bool:
        """The expected answer is a plain number (then an answer without a digit is not an
        answer but a format error)."""
        return bool(_PLAIN_NUMBER.fullmatch(self.answer))


def arithmetic(seed: int, kinds: Sequence[str] = ARITHMETIC_KINDS) -> dict[str, str]:
    """Arithmetic a 135M model cannot do in its head: ``product`` (3-digit × 3-digit) or
    ``chain`` (two or three operations on 2- and 3-digit numbers), drawn from `seed`."""
    unknown = [k for k in kinds if k not in ARITHMETIC_KINDS]
    if unknown or not kinds:
        raise ValueError(f"arithmetic kinds are {', '.join(ARITHMETIC_KINDS)}; got {kinds!r}")
    rng = random.Random(seed)
    kind = rng.choice(list(kinds))
    a, b = rng.randint(100, 999), rng.randint(100, 999)
    if kind == "product":
        text, value = f"{a} × {b}", a * b
    else:
        c, d = rng.randint(100, 999), rng.randint(11, 99)
        shape = rng.randrange(3)
        if shape == 0:
            text, value = f"{a} × {b} - {c}", a * b - c
        elif shape == 1:
            text, value = f"({a} + {c}) × {d}", (a + c) * d
        else:
            text, value = f"{a} × {d} + {b} × {d + 1}", a * d + b * (d + 1)
    return {"prompt": ARITHMETIC_PROMPT.format(text), "answer": str(value)}


def arithmetic_expression(prompt: str) -> str | None:
    """The expression an `arithmetic` prompt asks for (as written there, ``×`` included),
    or None for a prompt of another shape; what the tool env's expert types.

    >>> arithmetic_expression("What is (317 + 402) × 58?"), arithmetic_expression("Hi?")
    ('(317 + 402) × 58', None)
    """
    match = _ARITHMETIC_ASKS.fullmatch(prompt)
    return match.group(1) if match else None


BUILTIN_TASKS: dict[str, Callable[..., Any]] = {"arithmetic": arithmetic}


class TaskSource:
    """Tasks by seed from a built-in or user task function, of one split or of all."""

    def __init__(
        self, ref: str, kwargs: Mapping[str, Any] | None = None, split: str = "all"
    ) -> None:
        if split not in LAYOUTS:
            raise ValueError(f"the task split must be one of {', '.join(LAYOUTS)}, got {split!r}")
        if ref in BUILTIN_TASKS:
            self.fn = BUILTIN_TASKS[ref]
        elif ":" in ref:
            self.fn = load_function(ref, "tasks")
        else:
            close = difflib.get_close_matches(ref, BUILTIN_TASKS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"unknown tasks {ref!r}{hint}; built-in: {', '.join(BUILTIN_TASKS)}, or give "
                "your own as 'package.module:function'"
            )
        self.ref, self.kwargs, self.split = ref, dict(kwargs or {}), split

    def task(self, seed: int) -> ToolTask:
        """The task of `seed`: the first of its split among draws seeded from `seed`."""
        rng = random.Random(seed)
        draw_seed = seed
        for _ in range(MAX_DRAWS):
            try:
                data = self.fn(seed=draw_seed, **self.kwargs)
            except TypeError as exc:
                raise ValueError(f"tasks {self.ref!r} cannot be called with seed: {exc}") from None
            task = ToolTask.from_dict(data, self.ref)
            if self.split == "all" or layout_split(task.prompt) == self.split:
                return task
            draw_seed = rng.randrange(2**31)
        raise RuntimeError(
            f"tasks {self.ref!r}: no {self.split} task in {MAX_DRAWS} draws; a source with "
            "so few distinct tasks cannot be split"
        )


def judge(ref: str) -> Callable[[str, str], float]:
    """The judge named `ref`: ``math``, ``exact`` or ``"package.module:function"``."""
    if ref == "math":
        return _math
    if ref == "exact":
        return lambda answer, expected: float(answer.strip().casefold() == expected.casefold())
    if ":" in ref:
        fn = load_function(ref, "judge")
        return lambda answer, expected: float(fn(answer, expected))
    raise ValueError(f"unknown judge {ref!r}; built-in: math, exact, or 'package.module:function'")


def _math(answer: str, expected: str) -> float:
    from rollcli.rewards.math_rule import verify_answer

    if len(answer) > MAX_ANSWER_CHARS:
        return 0.0
    return float(verify_answer(answer, expected))

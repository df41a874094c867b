"""The judge's prompt (a rubric filled with the sample) and reading a score from its reply."""

from __future__ import annotations

import re
from typing import Any

DEFAULT_RUBRIC = (
    "You are grading an answer to a question.\n\n"
    "Question:\n{prompt}\n\n"
    "Answer:\n{response}\n\n"
    "{reference}"
    "Rate how correct and helpful the answer is on a scale from 0 to {max_score}. "
    "Reply with 'Score: <number>' and nothing else."
)
DEFAULT_YES_NO_RUBRIC = (
    "Question:\n{prompt}\n\nAnswer:\n{response}\n\n{reference}"
    "Is the answer correct and helpful? Reply yes or no."
)
_SCORE = re.compile(r"score\s*[:=]?\s*(-?\d+(?:\.\d+)?)", re.I)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def fill_rubric(rubric: str, sample: dict[str, Any], max_score: float = 10) -> str:
    """The rubric with `{prompt}`, `{response}`, `{answer}`, `{reference}`, `{max_score}` filled.

    `{reference}` is "Reference answer: ...\\n\\n" when the sample has a non-empty answer.

    >>> fill_rubric("Q: {prompt} A: {response} {reference}/{max_score}",
    ...             {"prompt": "2+2?", "response": "4", "answer": "4"}, 5)
    'Q: 2+2? A: 4 Reference answer:\\n4\\n\\n/5'
    """
    answer = str(sample.get("answer") or "")
    values = {
        "prompt": str(sample.get("prompt") or ""),
        "response": str(sample.get("response", "")),
        "answer": answer,
        "reference": f"Reference answer:\n{answer}\n\n" if answer else "",
        "max_score": f"{max_score:g}",
    }
    try:
        return rubric.format(**values)
    except (KeyError, IndexError) as exc:
        raise ValueError(
            f"the judge rubric has an unknown placeholder {exc}; use {{prompt}}, {{response}}, "
            "{answer}, {reference}, {max_score} (write {{ and }} for literal braces)"
        ) from None


def parse_score(reply: str, max_score: float = 10) -> float:
    """A score in [0, 1] from a judge's reply: `Score: N` if present, else the first number,
    divided by `max_score` and clipped. Raises ValueError when the reply has no number.

    >>> parse_score("Score: 7"), parse_score("I'd say 3/10", 10), parse_score("score=12", 10)
    (0.7, 0.3, 1.0)
    """
    m = _SCORE.search(reply) or _NUMBER.search(reply)
    if m is None:
        raise ValueError(f"no score in the judge's reply {reply[:120]!r}")
    value = float(m.group(1) if m.re is _SCORE else m.group(0))
    return min(max(value / max_score, 0.0), 1.0)

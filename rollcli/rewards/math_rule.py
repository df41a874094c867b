"""Math reward: correctness verified by `math-verify`, plus a small format component.

`math-verify` uses `signal.alarm` for its own timeouts, which only works in a process's
main thread; here its timeouts are disabled and the caller (`rollcli.rewards.runner`)
enforces a per-sample timeout by running rewards in separate processes.
"""

from __future__ import annotations

import re

from rollcli.rewards.registry import reward_options

_PLAIN_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
# a number, an operator (not `/`: `1/2` is a value) and a number: arithmetic left undone
_ARITHMETIC = re.compile(r"\d\s*[-+*×·]\s*\(?\s*-?\d")
_FINAL_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?\s*[.!]?\s*$")


def is_well_formatted(response: str) -> bool:
    r"""A clean final answer: the response ends with a number or a `\boxed{}` answer.

    >>> is_well_formatted("37 + 48 = 85")
    True
    >>> is_well_formatted("The answer is 85, because I added them up.")
    False
    """
    text = response.strip()
    return bool(re.search(r"\\boxed\{[^{}]*\}\s*\.?$", text) or _FINAL_NUMBER.search(text))


def verify_answer(response: str, answer: str) -> bool:
    """True when the response's final answer equals `answer`, by `math-verify`.

    math-verify extracts the answer itself (a `\\boxed{}` first, else the last expression).
    Two guards keep a reply from being paid for the problem it restates: the answer is read
    after the reply's last `=` (when that part holds one), and when `answer` is a plain
    number, an extracted answer that is still arithmetic of numbers (`5 + 8 + 8`) is not an
    answer: math-verify would evaluate it and pay "the answer is 5 + 8 + 8 = 24" for 21.

    >>> verify_answer("37 + 48 = 85", "85")
    True
    >>> verify_answer("37 + 48 = 84", "85")
    False
    >>> verify_answer("it is 1/2", "0.5")
    True
    >>> verify_answer("The final answer to this problem is 5 + 8 + 8 = 24.", "21")
    False
    >>> verify_answer("The answer is 5 + 8 + 8.", "21")
    False
    """
    from math_verify import parse, verify

    gold = parse(answer, parsing_timeout=None)
    if not gold:
        return False
    _, eq, after = response.rpartition("=")
    pred = (parse(after, parsing_timeout=None) if eq else None) or parse(
        response, parsing_timeout=None
    )
    if not pred:
        return False
    if _PLAIN_NUMBER.fullmatch(answer.strip()) and _ARITHMETIC.search(str(pred[-1])):
        return False
    return bool(verify(gold, pred, timeout_seconds=None))


@reward_options("format_weight", "format_when_cut")
def math_reward(
    response: str,
    answer: str,
    *,
    format_weight: float = 0.1,
    format_when_cut: bool = False,
    finished: bool = True,
    **_: object,
) -> dict[str, float]:
    """Score = (1 - format_weight) * correct + format_weight * format, where `format` is a
    well-formatted reply that finished: a reply cut off at the token limit (`finished`
    False) ends wherever the cut fell, so ending on a number there earns no format credit.
    `format_when_cut` (`reward.format_when_cut`) pays it there too, as before issue #81:
    rlvr-math keeps it, since its seeds learned less without it (docs/evaluation.md).

    >>> math_reward("37 + 48 = 85", "85")
    {'score': 1.0, 'correct': 1.0, 'format': 1.0}
    >>> math_reward("I think it is 85, maybe.", "85", format_weight=0.1)["score"]
    0.9
    >>> math_reward("37 + 48 = 86", "85", format_weight=0.1)["score"]
    0.1
    >>> math_reward("37 + 48 = 86", "85", format_weight=0.1, finished=False)["score"]
    0.0
    >>> math_reward("37 + 48 = 86", "85", finished=False, format_when_cut=True)["score"]
    0.1
    """
    correct = float(verify_answer(response, answer))
    fmt = float((finished or format_when_cut) and is_well_formatted(response))
    score = round((1.0 - format_weight) * correct + format_weight * fmt, 6)
    return {"score": score, "correct": correct, "format": fmt}

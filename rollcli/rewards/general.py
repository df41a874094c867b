"""The `general` reward: general reasoning (free-form and multiple-choice answers), by an
LLM judge where a judge endpoint is configured, else by rule.

The ROLL paper scores Multi-subject-RLVR with an LLM judge (its example config serves
virtuoussy/Qwen2.5-7B-Instruct-RLVR) and Nemotron-CrossThink by rule. Here one reward does
both: with the options `base_url` and `model` (an OpenAI-compatible endpoint, as the `judge`
reward takes them) each sample goes to the judge (`rollcli.rewards.judge.http`); without
them the rule below scores it, and `roll plan` / `--dry-run` say which applies.

The rule: the response's final answer (its last `\\boxed{...}`, else what follows its last
"answer is" / "Answer:", else its last line) matches the reference when, normalised (case,
spaces, punctuation, `\\text{}`), the two are equal, or both name the same option letter
(`(B)`, `B.`), or math-verify finds them equal (numbers, expressions).
"""

from __future__ import annotations

import re
from typing import Any

from rollcli.rewards.registry import reward_options
from rollcli.rewards.runner import batch_reward

_ANSWER_IS = re.compile(r"(?:answer\s+is|answer\s*:)\s*(.+)", re.I | re.S)
_LETTER = re.compile(r"^\(?([A-Ja-j])\)?(?:[.:)]|\s|$)")


def final_answer(response: str) -> str:
    r"""The answer a response ends on.

    >>> final_answer("so x = 2, thus \\boxed{4}.")
    '4'
    >>> final_answer("Therefore, the answer is Western blot.")
    'Western blot.'
    >>> final_answer("reasoning...\nB")
    'B'
    """
    boxed = _last_boxed(response)
    if boxed is not None:
        return boxed
    found = list(_ANSWER_IS.finditer(response))
    if found:
        return found[-1].group(1).strip().splitlines()[0].strip()
    lines = [line.strip() for line in response.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def normalise(text: str) -> str:
    r"""Lower case, `\text{x}` as x, no punctuation or spaces at the ends, one space inside.

    >>> normalise("  \\text{Western  Blot}. ")
    'western blot'
    """
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\s+", " ", text.lower()).strip()
    return text.strip(" .,;:!?\"'`*$")


def _letter(text: str) -> str | None:
    m = _LETTER.match(text.strip())
    return m.group(1).upper() if m else None


def rule_match(response: str, answer: str) -> bool:
    """Whether the response's final answer is the reference `answer`.

    >>> rule_match("The answer is (B) because ...", "B")
    True
    >>> rule_match("Therefore, the answer is western blot", "Western blot")
    True
    >>> rule_match("\\\\boxed{0.5}", "1/2"), rule_match("The answer is C", "B")
    (True, False)
    """
    got, want = final_answer(response), str(answer)
    if not got or not want.strip():
        return False
    if normalise(got) == normalise(want):
        return True
    letter = _letter(want)
    if letter is not None and len(normalise(want)) <= 3:
        return _letter(got) == letter
    from rollcli.rewards.math_rule import verify_answer

    try:
        return verify_answer(got, want)
    except Exception:  # math-verify on text that is not math: no match
        return False


def judge_configured(options: dict[str, Any]) -> bool:
    """Whether the options name a judge endpoint (then the judge scores, else the rule)."""
    return bool(options.get("base_url") and options.get("model"))


@reward_options(
    "base_url", "model", "api_key_env", "rubric", "max_score", "concurrency", "request_timeout_s"
)
@batch_reward
def general_reward(
    samples: list[dict[str, Any]],
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key_env: str | None = None,
    rubric: str | None = None,
    max_score: float = 10,
    concurrency: int = 4,
    request_timeout_s: float = 30.0,
    **_: Any,
) -> list[dict[str, Any]]:
    """The judge's score where `base_url` and `model` are set, else the rule's 0/1.

    >>> [r["score"] for r in general_reward([{"response": "The answer is B", "answer": "B"},
    ...                                      {"response": "The answer is A", "answer": "B"}])]
    [1.0, 0.0]
    """
    if base_url and model:
        from rollcli.rewards.judge.http import judge_reward
        from rollcli.rewards.judge.rubric import DEFAULT_RUBRIC

        judged = judge_reward(
            samples,
            base_url=base_url,
            model=model,
            api_key_env=api_key_env,
            rubric=rubric or DEFAULT_RUBRIC,
            max_score=max_score,
            concurrency=concurrency,
            request_timeout_s=request_timeout_s,
        )
        return [{**r, "judged": 1.0} for r in judged]
    out = []
    for s in samples:
        correct = float(rule_match(str(s.get("response", "")), str(s.get("answer", ""))))
        out.append({"score": correct, "correct": correct, "judged": 0.0})
    return out

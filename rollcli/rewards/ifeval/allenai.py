"""allenai/RLVR-IFeval's `ground_truth` as `ifeval` constraints.

Each row of allenai/RLVR-IFeval (the dataset card: columns `messages`, `ground_truth`,
`constraint_type`, `constraint`) carries its constraint as JSON in `ground_truth`:
`{"func_name": "verify_keywords", "keyword_list": [...], "N": null, ...}`, naming one of
open-instruct's checking functions and its arguments (unused ones `null`). `constraints`
maps the functions with a checker of the same meaning here to `{"type": ..., **args}`.

The rest (`validate_response_language`, `validate_choice`, `validate_paragraphs`,
`validate_highlighted_sections`, `validate_sections`, `validate_two_responses`,
`validate_frequency_capital_words`, and `verify_paragraph_count`, whose paragraphs are
split by `* * *`, not blank lines) have no checker here: the reward scores such a row 0 and
says so (`error`, and the metric `ifeval/unchecked`, so `reward/ifeval/unchecked` counts
them), never a silent score.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Args = dict[str, Any]


def _bounds(args: Args) -> Args:
    """`N` with its `quantifier` ("at least", "at most", "less than", "around": within 10%)."""
    n, q = int(args["N"]), str(args.get("quantifier") or "").lower()
    if q == "at least":
        return {"min": n}
    if q in ("at most", "less than"):
        return {"max": n if q == "at most" else n - 1}
    if q == "around":
        return {"min": int(n * 0.9), "max": -(-n * 11 // 10)}
    return {"min": n, "max": n}


MAPPED: dict[str, Callable[[Args], Args]] = {
    "validate_lowercase": lambda a: {"type": "lowercase"},
    "validate_uppercase": lambda a: {"type": "uppercase"},
    "validate_no_commas": lambda a: {"type": "no_commas"},
    "validate_quotation": lambda a: {"type": "quotation"},
    "validate_json_format": lambda a: {"type": "json_format"},
    "validate_title": lambda a: {"type": "title"},
    "verify_keywords": lambda a: {"type": "include_keywords", "keywords": a["keyword_list"]},
    "validate_forbidden_words": lambda a: {
        "type": "exclude_keywords",
        "keywords": a["forbidden_words"],
    },
    "verify_keyword_frequency": lambda a: {
        "type": "keyword_frequency",
        "keyword": a["word"],
        **_bounds({"N": a["N"]}),
    },
    "verify_letter_frequency": lambda a: {
        "type": "letter_frequency",
        "letter": a["letter"],
        **_bounds({"N": a["N"]}),
    },
    "validate_word_constraint": lambda a: {"type": "word_count", **_bounds(a)},
    "verify_sentence_constraint": lambda a: {"type": "sentence_count", **_bounds(a)},
    "verify_bullet_points": lambda a: {"type": "bullet_count", **_bounds({"N": a["N"]})},
    "validate_placeholders": lambda a: {"type": "placeholder_count", "min": int(a["N"])},
    "verify_postscript": lambda a: {"type": "postscript", "marker": a["postscript_marker"]},
    "validate_end": lambda a: {"type": "ends_with", "phrase": a["end_phrase"]},
    "validate_repeat_prompt": lambda a: {"type": "starts_with", "phrase": a["original_prompt"]},
}


def is_ground_truth(spec: Any) -> bool:
    """Whether a parsed `answer` is an RLVR-IFeval `ground_truth` (it names `func_name`)."""
    return isinstance(spec, dict) and "func_name" in spec


def constraints(ground_truth: dict[str, Any]) -> list[dict[str, Any]]:
    """The `ifeval` constraints of one `ground_truth`; ValueError naming a function with no
    checker here.

    >>> constraints({"func_name": "validate_word_constraint", "N": 50, "quantifier": "at least"})
    [{'type': 'word_count', 'min': 50}]
    >>> constraints({"func_name": "verify_keywords", "keyword_list": ["owl"], "N": None})
    [{'type': 'include_keywords', 'keywords': ['owl']}]
    """
    name = str(ground_truth.get("func_name"))
    if name not in MAPPED:
        raise UncheckedConstraint(name)
    args = {k: v for k, v in ground_truth.items() if v is not None}
    try:
        return [MAPPED[name](args)]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"RLVR-IFeval ground_truth {name}: missing or bad argument {exc}"
        ) from None


class UncheckedConstraint(ValueError):
    """An RLVR-IFeval function with no checker here (scored 0 and counted, see above)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"the RLVR-IFeval constraint {name!r} has no checker in roll (scored 0, counted "
            "in ifeval/unchecked)"
        )
        self.name = name


def parse(answer: Any) -> Any:
    """`answer` as parsed JSON where it is a JSON string, else as it is."""
    if isinstance(answer, str):
        try:
            return json.loads(answer)
        except json.JSONDecodeError:
            return answer
    return answer
